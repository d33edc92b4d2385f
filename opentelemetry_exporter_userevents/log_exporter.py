# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsLogExporter: logs as ``<prefix>_log_<class>`` records, one tracepoint per
severity class, so a listener of error and fatal costs nothing for info logs; with
``format="eventheader"``, Common Schema events on ``<prefix>_L<level>K<keyword>``, one
tracepoint per level."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

from opentelemetry_exporter_userevents._export.common_schema_log import (
    encode_log as encode_common_schema_log,
)
from opentelemetry_exporter_userevents._export.config import EVENTHEADER
from opentelemetry_exporter_userevents._export.exporter_base import Encoder, ExporterBase
from opentelemetry_exporter_userevents._export.log_encoder import encode_log, severity_number
from opentelemetry_exporter_userevents._export.redaction import Redactor, redact_log
from opentelemetry_exporter_userevents._export.tracepoint_sets import log_tracepoints
from opentelemetry_exporter_userevents.abi.user_events import Registration

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
        format: str | None = None,  # noqa: A002 - the option's name everywhere
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
            format=format,
            **kwargs,
        )
        tracepoints, keys = log_tracepoints(config)
        super().__init__(tracepoints, config, redact, meter_provider)
        self.registrations: dict[str, Registration | None] = {
            key: self._writer.registrations[key] for key in tracepoints
        }
        """By severity class (``info``, ...), or by level (``L4``, ...) in EventHeader's
        format."""
        # Severity number (0..24) -> registration, for one lookup per record.
        self._by_number = [self.registrations[key] for key in keys]
        self._encode: Encoder | None = None
        """The Common Schema encoder with ``format="eventheader"``; None: our own format's
        (``encode_log``, looked up at each export)."""
        if config.format == EVENTHEADER:
            self._encode = partial(encode_common_schema_log, role=self._cloud_role)
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
        encode = encode_log if self._encode is None else self._encode
        if self._export_items(batch, self._route, encode, redact_log):
            return LogRecordExportResult.SUCCESS
        return LogRecordExportResult.FAILURE

    def shutdown(self) -> None:
        self._shut_down()
