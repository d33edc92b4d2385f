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
