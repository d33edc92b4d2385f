# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Our tracepoint names: ``<prefix>_span``, ``<prefix>_log_<class>`` and
``<prefix>_resource``, each with its schema.

With MULTI_FORMAT the kernel adds ``.<hex id>`` per format version
(``user_events_multi/otel_span.1f``); :func:`tracepoint_kind` sees through it.
"""

from __future__ import annotations

from opentelemetry_exporter_userevents.abi.format import split_multi_format_name
from opentelemetry_exporter_userevents.record.schema import LOG, RESOURCE, SPAN, Schema

SPAN_KIND = "span"
LOG_KIND = "log"
RESOURCE_KIND = "resource"

SEVERITY_CLASSES = ("trace", "debug", "info", "warn", "error", "fatal")
"""Log tracepoints, one per class of four severity numbers (1-4 trace, ..., 21-24 fatal)."""


def severity_class(severity_number: int) -> str:
    """The class of a severity number; unset (0) and out-of-range numbers count as info."""
    if 1 <= severity_number <= 24:
        return SEVERITY_CLASSES[(severity_number - 1) // 4]
    return "info"


def span_tracepoint(prefix: str) -> str:
    return f"{prefix}_span"


def log_tracepoint(prefix: str, severity: str) -> str:
    return f"{prefix}_log_{severity}"


def resource_tracepoint(prefix: str) -> str:
    return f"{prefix}_resource"


def tracepoint_kinds(prefix: str) -> dict[str, tuple[str, Schema]]:
    """Base names of a prefix's tracepoints (no ``.<id>``), with their kind and schema."""
    kinds = {
        span_tracepoint(prefix): (SPAN_KIND, SPAN),
        resource_tracepoint(prefix): (RESOURCE_KIND, RESOURCE),
    }
    for severity in SEVERITY_CLASSES:
        kinds[log_tracepoint(prefix, severity)] = (LOG_KIND, LOG)
    return kinds


def base_name(tracepoint: str) -> str:
    """``otel_span.1f`` -> ``otel_span``; single-format names stay as they are."""
    return split_multi_format_name(tracepoint)[0]
