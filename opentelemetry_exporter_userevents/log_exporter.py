# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsLogExporter: logs as ``<prefix>_log_<class>`` records, one tracepoint per
severity class, so a listener of error and fatal costs nothing for info logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

from opentelemetry_exporter_userevents.abi import Registration
from opentelemetry_exporter_userevents.exporter_core import ExporterCore
from opentelemetry_exporter_userevents.logs import encode_log, severity_number
from opentelemetry_exporter_userevents.redaction import Redactor, redact_log
from opentelemetry_exporter_userevents.schema import LOG, SEVERITY_CLASSES, severity_class


class UserEventsLogExporter(ExporterCore, LogRecordExporter):
    """Writes each log record as one user_events record, only while its class is listened to.

    Settings and ``redact`` as for UserEventsSpanExporter. ``export`` never raises.
    """

    _signal = "log"

    def __init__(
        self,
        *,
        prefix: str | None = None,
        max_record_size: int | None = None,
        resource_interval_millis: int | None = None,
        tracefs: str | None = None,
        redact: Redactor | None = None,
        **kwargs: Any,
    ) -> None:
        config = self.settings(
            prefix=prefix,
            max_record_size=max_record_size,
            resource_interval_millis=resource_interval_millis,
            tracefs=tracefs,
            **kwargs,
        )
        commands = {cls: LOG.command(f"{config.prefix}_log_{cls}") for cls in SEVERITY_CLASSES}
        super().__init__(commands, config, redact)
        self.registrations: dict[str, Registration | None] = {
            cls: self._writer.registrations[cls] for cls in SEVERITY_CLASSES
        }
        # Severity number (0..24) -> registration, for one lookup per record.
        self._by_number = [self.registrations[severity_class(n)] for n in range(25)]

    def registration_for(self, number: int) -> Registration | None:
        return self._by_number[number] if 0 <= number <= 24 else self._by_number[0]

    def enabled_for(self, number: int) -> bool:
        """True while a tracer listens to the class of severity ``number`` (0 = unset)."""
        registration = self.registration_for(number)
        return (
            registration is not None and registration.enable_words[registration.enable_index] != 0
        )

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        if self._shutdown:
            return LogRecordExportResult.FAILURE
        max_size = self.config.max_record_size
        redact = self._redact
        for readable in batch:
            registration = self.registration_for(severity_number(readable))
            if registration is None:  # unavailable (a no-op, warned once) or not registered
                if self._writer.available:
                    self._writer.count("dropped_unregistered")
                continue
            if not registration.enable_words[registration.enable_index]:
                self._writer.count("not_listened")
                continue
            try:
                resource_id = self._resources.announce(readable.resource)
                if redact is not None:
                    readable = redact_log(readable, redact)
                payload, truncated = encode_log(readable, resource_id, max_size)
            except Exception as exc:  # noqa: BLE001 - never into the application
                self._drop_invalid("a log record", exc)
                continue
            if truncated:
                self._writer.count("truncated")
            self._writer.write(registration, payload)
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        self._shut_down()
