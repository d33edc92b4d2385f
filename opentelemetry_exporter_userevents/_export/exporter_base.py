# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the span and log exporters share: settings, registrations, resource
announcements, the export loop, counts, and an idempotent shutdown (as the SDK shares one
batch processor between spans and logs)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from opentelemetry.metrics import MeterProvider

from opentelemetry_exporter_userevents import _forksafe
from opentelemetry_exporter_userevents._export.common_schema_envelope import CloudRole
from opentelemetry_exporter_userevents._export.config import EVENTHEADER, ExporterConfig
from opentelemetry_exporter_userevents._export.redaction import Redactor, checked
from opentelemetry_exporter_userevents._export.resource import ResourceAnnouncer
from opentelemetry_exporter_userevents._export.self_metrics import (
    internal_metrics_enabled,
    observe_stats,
)
from opentelemetry_exporter_userevents._export.writer import EventWriter, ExportStats
from opentelemetry_exporter_userevents.abi.user_events import Registration
from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record.schema import RESOURCE, Schema
from opentelemetry_exporter_userevents.record.tracepoints import resource_tracepoint

_logger = logging.getLogger(__name__)


Item = TypeVar("Item")
"""A ReadableSpan or a ReadableLogRecord."""
Encoder = Callable[[Any, int, int], tuple[bytes, bool]]
"""``encode(item, resource_id, max_size) -> (payload, truncated)``."""


class ExporterBase(Generic[Item]):
    """Registers ``tracepoints`` (key -> base name and schema) and the resource
    tracepoint; a subclass routes each item to a registration and names its encoder, and
    :meth:`_export_items` does the rest."""

    _signal = "span"
    """What the subclass exports: ``span``, ``log`` or ``metric_data_point`` (names its
    metrics)."""
    _item_name = "a span"
    """An item, in messages."""

    def __init__(
        self,
        tracepoints: dict[str, tuple[str, Schema]],
        config: ExporterConfig,
        redact: Redactor | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        """``meter_provider``: where this exporter's own metrics go when
        OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED is true (default: the global one)."""
        self.config = config
        self._redact = checked(redact)
        eventheader = config.format == EVENTHEADER
        if not eventheader:  # EventHeader's records carry the resource in PartA
            tracepoints = {
                **tracepoints,
                "resource": (resource_tracepoint(config.prefix), RESOURCE),
            }
        self._writer = EventWriter(
            config.tracefs,
            tracepoints,
            config.multi_format and not eventheader,
            config.user_events_data,
            refused=config.refused is not None,
        )
        self._resources = ResourceAnnouncer(
            self._writer,
            self._writer.registrations.get("resource"),
            config.resource_interval_millis,
            self._redact,
        )
        self._cloud_role = CloudRole(self._redact)
        """PartA's resource fields, in the EventHeader format."""
        self._shutdown = False
        self._metrics = False
        self._lock = threading.Lock()
        _forksafe.register(self)
        if internal_metrics_enabled():
            self.instrument_metrics(meter_provider)

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

    def _export_items(
        self,
        items: Sequence[Item],
        route: Callable[[Item], Registration | None],
        encode: Encoder,
        redact: Callable[[Item, Redactor], Item],
    ) -> bool:
        """The export loop: for each item, its registration's enable bit first, then its
        resource announced, redaction, encoding and one write; every item counted once.
        False after shutdown (each item counted in dropped_shutdown). Never raises into the
        application."""
        writer = self._writer
        batch = self._batch(items)
        if batch is None:
            return False
        if self._shutdown:
            if any(r is not None for r in writer.registrations.values()):  # else a no-op
                writer.count("dropped_shutdown", len(batch))
            return False
        max_size = self.config.max_record_size
        redactor = self._redact
        for item in batch:
            try:  # whatever the SDK hands us: never into the application
                registration = route(item)
                if registration is None:  # unavailable (a no-op, warned once) or unregistered
                    if writer.available:
                        writer.count("dropped_unregistered")
                    continue
                if not registration.enabled:
                    writer.count("not_listened")
                    continue
                resource_id = self._resources.announce(item.resource)  # type: ignore[attr-defined]
                if redactor is not None:
                    item = redact(item, redactor)
                payload, truncated = encode(item, resource_id, max_size)
            except Exception as exc:  # noqa: BLE001 - never into the application
                self._drop_invalid(self._item_name, exc)
                continue
            if truncated:
                writer.count("truncated")
            writer.write(registration, payload)
        return True

    def _batch(self, items: Sequence[Item]) -> Sequence[Item] | None:
        """``items`` as a sequence; None (said once) if it is not an iterable at all."""
        if type(items) is tuple or type(items) is list:
            return items
        try:
            return list(items)
        except Exception as exc:  # noqa: BLE001 - not a batch: say so, never raise
            self._writer.report(
                ("not a batch", type(exc)),
                "user_events: export() was given no sequence of items (%s: %.200s)",
                type(exc).__name__,
                exc,
            )
            return None

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
