# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Every flag bit of our records, defined once for the writer and the reader."""

TRUNCATED_ATTRIBUTES = 1
TRUNCATED_EVENTS = 2
TRUNCATED_LINKS = 4
TRUNCATED_TEXT = 8
"""A plain-text field (name, body, ...) was cut; it ends with TRUNCATION_MARK."""
TRUNCATION_MARK = "…[truncated]"

# parent_flags of otel_span
PARENT_PRESENT = 1
"""The span has a parent."""
PARENT_REMOTE = 2
"""The parent span context is remote."""

# flags of otel_log_*
LOG_SEVERITY_TEXT = 1
"""severity_text is set (an empty text is not the same as none)."""
LOG_EVENT_NAME = 2
"""event_name is set."""
LOG_BODY = 4
"""body is set."""

# truncated bits of otel_metric_* (with TRUNCATED_ATTRIBUTES and TRUNCATED_TEXT above)
TRUNCATED_EXEMPLARS = 16
"""Exemplars were left out from the end (counted in dropped_exemplars)."""
TRUNCATED_BUCKETS = 32
"""Buckets were merged to fit: an explicit histogram kept every other bound, an exponential
one was downscaled; counts, sum, min and max are unchanged."""

# flags of otel_metric_sum and otel_metric_gauge
METRIC_VALUE_INT = 1
"""The point's value is an integer; ``value`` holds it exactly."""
METRIC_VALUE_BIG = 2
"""An integer outside s64: its exact value is in ``value_text``."""

# flags of otel_metric_histogram and otel_metric_exp_histogram
METRIC_SUM_INT = 1
"""``sum_bits`` holds an integer sum as s64 (two's complement), not a double's bits."""
METRIC_MIN_INT = 2
"""``min_bits`` holds an integer as s64."""
METRIC_MAX_INT = 4
"""``max_bits`` holds an integer as s64."""
