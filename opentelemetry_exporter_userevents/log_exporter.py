# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsLogExporter: logs as ``<prefix>_log_<class>`` records, one tracepoint per
severity class, so a listener of error and fatal costs nothing for info logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

from opentelemetry_exporter_userevents._export.exporter_base import ExporterBase
from opentelemetry_exporter_userevents._export.log_encoder import encode_log, severity_number
from opentelemetry_exporter_userevents._export.redaction import Redactor, redact_log
from opentelemetry_exporter_userevents.abi.user_events import Registration
from opentelemetry_exporter_userevents.record.schema import LOG
from opentelemetry_exporter_userevents.record.tracepoints import (
    SEVERITY_CLASSES,
    log_tracepoint,
    severity_class,
)

__all__ = ["UserEventsLogExporter"]


class UserEventsLogExporter(ExporterBase[ReadableLogRecord], LogRecordExporter):
    """Writes each log record as one user_events record, only while its class is listened to.

    Settings and ``redact`` as for UserEventsSpanExporter. ``export`` never raises.
    """

    _signal = "log"
    _item_name = "a log record"

    def __init__(
        self,
        *,
        prefix: str | None = None,
        max_record_size: int | None = None,
        resource_interval_millis: int | None = None,
        tracefs: str | None = None,
        user_events_data: str | None = None,
        multi_format: bool | None = None,
        redact: Redactor | None = None,
        meter_provider: MeterProvider | None = None,
        **kwargs: Any,
    ) -> None:
        config = self.settings(
            prefix=prefix,
            max_record_size=max_record_size,
            resource_interval_millis=resource_interval_millis,
            tracefs=tracefs,
            user_events_data=user_events_data,
            multi_format=multi_format,
            **kwargs,
        )
        tracepoints = {cls: (log_tracepoint(config.prefix, cls), LOG) for cls in SEVERITY_CLASSES}
        super().__init__(tracepoints, config, redact, meter_provider)
        self.registrations: dict[str, Registration | None] = {
            cls: self._writer.registrations[cls] for cls in SEVERITY_CLASSES
        }
        # Severity number (0..24) -> registration, for one lookup per record.
        self._by_number = [self.registrations[severity_class(n)] for n in range(25)]
        self.any_class_word = self._writer.shared_enable_word(list(self.registrations.values()))
        """``any_class_word[0]`` is non-zero while any severity class is listened to."""

    def registration_for(self, number: int) -> Registration | None:
        """The registration of severity ``number``'s class (0 = unset counts as info)."""
        return self._by_number[number] if 0 <= number <= 24 else self._by_number[0]

    def enabled_for(self, number: int) -> bool:
        """True while a tracer listens to the class of severity ``number`` (0 = unset)."""
        registration = self.registration_for(number)
        return registration is not None and registration.enabled

    def _route(self, readable: ReadableLogRecord) -> Registration | None:
        return self.registration_for(severity_number(readable))

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        if self._export_items(batch, self._route, encode_log, redact_log):
            return LogRecordExportResult.SUCCESS
        return LogRecordExportResult.FAILURE

    def shutdown(self) -> None:
        self._shut_down()
