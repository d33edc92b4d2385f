# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the span and log exporters share: settings, registrations, resource
announcements, counts, and an idempotent shutdown."""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry.metrics import MeterProvider

from opentelemetry_exporter_userevents import anyvalue, forksafe
from opentelemetry_exporter_userevents.config import ExporterConfig
from opentelemetry_exporter_userevents.metrics import observe_stats
from opentelemetry_exporter_userevents.redaction import Redactor, checked
from opentelemetry_exporter_userevents.resource import ResourceAnnouncer
from opentelemetry_exporter_userevents.schema import RESOURCE
from opentelemetry_exporter_userevents.writer import EventWriter, ExportStats

_logger = logging.getLogger(__name__)


class ExporterCore:
    """Registers ``commands`` (name -> command, for the configured prefix) and the resource
    tracepoint; a subclass writes its records through ``self._writer``."""

    _signal = "span"
    """What the subclass exports: ``span`` or ``log`` (names its metrics)."""

    def __init__(
        self, commands: dict[str, str], config: ExporterConfig, redact: Redactor | None = None
    ) -> None:
        self.config = config
        self._redact = checked(redact)
        commands = {**commands, "resource": RESOURCE.command(f"{config.prefix}_resource")}
        self._writer = EventWriter(config.tracefs, commands)
        self._resources = ResourceAnnouncer(
            self._writer,
            self._writer.registrations["resource"],
            config.resource_interval_millis,
            self._redact,
        )
        self._shutdown = False
        self._metrics = False
        self._lock = threading.Lock()
        forksafe.register(self)

    @staticmethod
    def settings(**arguments: Any) -> ExporterConfig:
        return ExporterConfig.from_arguments(**arguments)

    @property
    def stats(self) -> ExportStats:
        """Counts of records written, skipped while nobody listened, dropped and truncated."""
        return self._writer.stats

    def instrument_metrics(self, meter_provider: MeterProvider | None = None) -> None:
        """Report :attr:`stats` as OpenTelemetry metrics through ``meter_provider`` (the
        global one by default): observable counters, read only when metrics are collected.
        Idempotent."""
        with self._lock:
            if self._metrics:
                return
            self._metrics = True
        observe_stats(self.stats, self._signal, meter_provider)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export is written before it returns

    def _drop_invalid(self, what: str, exc: Exception) -> None:
        """Count a record that could not be encoded, and say why (once per kind of error)."""
        self._writer.count("dropped_invalid")
        self._writer.report(
            ("invalid", type(exc)),
            "user_events: %s dropped (counted in dropped_invalid): %s: %.200s",
            what,
            type(exc).__name__,
            exc,
            exc_info=not isinstance(exc, anyvalue.UnsupportedValue),
        )

    def _shut_down(self) -> None:
        with self._lock:
            if self._shutdown:
                _logger.warning("%s already shut down", type(self).__name__)
                return
            self._shutdown = True
        self._writer.close()
