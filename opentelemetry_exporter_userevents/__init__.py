# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OpenTelemetry span, log and metric exporters that write Linux user_events tracepoints.

Drop-in: ``OTEL_TRACES_EXPORTER=user_events``, ``OTEL_LOGS_EXPORTER=user_events`` and
``OTEL_METRICS_EXPORTER=user_events``.
In code, prefer the processors, which check the enable bit before anything else::

    provider.add_span_processor(UserEventsSpanProcessor(UserEventsSpanExporter()))
"""

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
from opentelemetry_exporter_userevents.version import __version__

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
