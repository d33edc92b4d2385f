# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Processors that check the enable bit before anything is queued or encoded.

Use them when you build the provider in code or in a declarative config file: a span or
log that nobody listens to then costs one memory read, and one that is listened to is
written synchronously on the thread that ended it (one ``writev``, no queue, no thread).
The ``OTEL_TRACES_EXPORTER=user_events`` path wraps the exporter in the SDK's batch
processor instead: the check then runs in ``export``, after queueing, before encoding.
"""

from __future__ import annotations

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk._logs import LogRecordProcessor, ReadableLogRecord, ReadWriteLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from opentelemetry_exporter_userevents._export.log_encoder import severity_value
from opentelemetry_exporter_userevents.abi.user_events import enable_word
from opentelemetry_exporter_userevents.log_exporter import UserEventsLogExporter
from opentelemetry_exporter_userevents.span_exporter import UserEventsSpanExporter

__all__ = ["UserEventsLogRecordProcessor", "UserEventsSpanProcessor"]


def _export_now(exporter: UserEventsSpanExporter | UserEventsLogExporter, item: object) -> None:
    """Export one item on this thread, with instrumentation suppressed (as the SDK's
    simple processors do, so that the export itself is not traced)."""
    token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        exporter.export((item,))  # type: ignore[arg-type]
    finally:
        detach(token)


class UserEventsSpanProcessor(SpanProcessor):
    """Exports each ended, sampled span at once, but only while a tracer listens."""

    def __init__(self, exporter: UserEventsSpanExporter | None = None) -> None:
        self.exporter = exporter if exporter is not None else UserEventsSpanExporter()
        self._word = enable_word(self.exporter.registration)

    def on_end(self, span: ReadableSpan) -> None:
        if not self._word[0]:  # nobody listens: as close to a processor that does nothing
            return
        try:
            sampled = span.context.trace_flags.sampled
        except Exception as exc:  # noqa: BLE001 - not a span: counted, never raised
            self.exporter._drop_invalid("a span", exc)
            return
        if not sampled:
            return
        _export_now(self.exporter, span)

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class UserEventsLogRecordProcessor(LogRecordProcessor):
    """Exports each log record at once, but only while its severity class is listened to."""

    def __init__(self, exporter: UserEventsLogExporter | None = None) -> None:
        self.exporter = exporter if exporter is not None else UserEventsLogExporter()
        # One read while no class is listened to; then the class's word, by severity number.
        self._any_class = self.exporter.any_class_word
        self._enable = [enable_word(self.exporter.registration_for(n)) for n in range(25)]

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        if not self._any_class[0]:  # no class listened to: as close to doing nothing
            return
        try:
            if not self._enable[severity_value(log_record.log_record.severity_number)][0]:
                return
            if log_record.resource is None:  # the SDK's Logger always sets one
                log_record = ReadableLogRecord(  # type: ignore[assignment]
                    log_record=log_record.log_record,
                    resource=Resource({}),
                    instrumentation_scope=log_record.instrumentation_scope,
                    limits=log_record.limits,
                )
        except Exception as exc:  # noqa: BLE001 - not a log record we can write: counted
            self.exporter._drop_invalid("a log record", exc)
            return
        # Encoded as it is: a ReadWriteLogRecord has the fields of a ReadableLogRecord (the
        # SDK keeps them in sync), and the record is written before this returns.
        _export_now(self.exporter, log_record)

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
