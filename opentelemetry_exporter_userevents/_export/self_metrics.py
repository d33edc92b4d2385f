# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""An exporter's ExportStats as OpenTelemetry metrics.

Observable counters, read from ``ExportStats.snapshot()`` when a metric reader collects:
the export path does no extra work. The exported/failed count follows the semantic
conventions for SDK exporters (``otel.sdk.exporter.span.exported`` and
``otel.sdk.exporter.log.exported``, with ``error.type`` on drops); records skipped because
nobody listened, and records cut to fit, have counters of their own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation, get_meter_provider

from opentelemetry_exporter_userevents._export.writer import ExportStats
from opentelemetry_exporter_userevents.version import __version__

_ERROR_TYPES = {
    "dropped_detached": "detached",
    "dropped_invalid": "invalid",
    "dropped_unregistered": "unregistered",
    "dropped_write_error": "write_error",
}
_numbers = itertools.count()


def observe_stats(
    stats: ExportStats, signal: str, meter_provider: MeterProvider | None = None
) -> None:
    """Register observable counters for ``stats``; ``signal`` is ``span`` or ``log``."""
    provider = meter_provider if meter_provider is not None else get_meter_provider()
    meter = provider.get_meter("opentelemetry-exporter-userevents", __version__)
    component_type = f"user_events_{signal}_exporter"
    component = {
        "otel.component.type": component_type,
        "otel.component.name": f"{component_type}/{next(_numbers)}",
    }
    unit = "{span}" if signal == "span" else "{log_record}"

    def exported(options: CallbackOptions) -> Iterator[Observation]:
        counts = stats.snapshot()
        yield Observation(counts["written"], component)
        for name, error_type in _ERROR_TYPES.items():
            yield Observation(counts[name], {**component, "error.type": error_type})

    def counter(name: str) -> Callable[[CallbackOptions], Iterator[Observation]]:
        def observe(options: CallbackOptions) -> Iterator[Observation]:
            yield Observation(stats.snapshot()[name], component)

        return observe

    meter.create_observable_counter(
        f"otel.sdk.exporter.{signal}.exported",
        callbacks=[exported],
        unit=unit,
        description="Records written to user_events (no error.type) or dropped (error.type).",
    )
    meter.create_observable_counter(
        f"user_events.exporter.{signal}.not_listened",
        callbacks=[counter("not_listened")],
        unit=unit,
        description="Records skipped because no tracer listened: nothing was encoded.",
    )
    meter.create_observable_counter(
        f"user_events.exporter.{signal}.truncated",
        callbacks=[counter("truncated")],
        unit=unit,
        description="Records written with parts cut to fit the record size.",
    )
