# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OpenTelemetry span, log and metric exporters that write Linux user_events tracepoints.

Drop-in: ``OTEL_TRACES_EXPORTER=user_events``, ``OTEL_LOGS_EXPORTER=user_events`` and
``OTEL_METRICS_EXPORTER=user_events``.
In code, prefer the processors, which check the enable bit before anything else::

    provider.add_span_processor(UserEventsSpanProcessor(UserEventsSpanExporter()))

The names are imported when first used (PEP 562), so that the reader, a subpackage, starts
without the write side and the SDK.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from opentelemetry_exporter_userevents.version import __version__

if TYPE_CHECKING:
    from opentelemetry_exporter_userevents._export.writer import ExportStats
    from opentelemetry_exporter_userevents.lean_tracer import UserEventsTracerProvider
    from opentelemetry_exporter_userevents.log_exporter import UserEventsLogExporter
    from opentelemetry_exporter_userevents.logging_handler import UserEventsLoggingHandler
    from opentelemetry_exporter_userevents.metric_exporter import (
        UserEventsMetricExporter,
        UserEventsMetricReader,
    )
    from opentelemetry_exporter_userevents.processors import (
        UserEventsLogRecordProcessor,
        UserEventsSpanProcessor,
    )
    from opentelemetry_exporter_userevents.sampler import UserEventsSampler
    from opentelemetry_exporter_userevents.span_exporter import UserEventsSpanExporter

_MODULES = {
    "ExportStats": "_export.writer",
    "UserEventsLogExporter": "log_exporter",
    "UserEventsLogRecordProcessor": "processors",
    "UserEventsLoggingHandler": "logging_handler",
    "UserEventsMetricExporter": "metric_exporter",
    "UserEventsMetricReader": "metric_exporter",
    "UserEventsSampler": "sampler",
    "UserEventsSpanExporter": "span_exporter",
    "UserEventsSpanProcessor": "processors",
    "UserEventsTracerProvider": "lean_tracer",
}

__all__ = [
    "ExportStats",
    "UserEventsLogExporter",
    "UserEventsLogRecordProcessor",
    "UserEventsLoggingHandler",
    "UserEventsMetricExporter",
    "UserEventsMetricReader",
    "UserEventsSampler",
    "UserEventsSpanExporter",
    "UserEventsSpanProcessor",
    "UserEventsTracerProvider",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
