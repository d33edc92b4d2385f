# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""An exporter's ExportStats as OpenTelemetry metrics.

Observable counters, read from ``ExportStats.snapshot()`` when a metric reader collects:
the export path does no extra work. The exported/failed count follows the semantic
conventions for SDK exporters, as the OTLP exporters report it
(``otel.sdk.exporter.span.exported``, ``otel.sdk.exporter.log.exported`` and
``otel.sdk.exporter.metric_data_point.exported``, with ``otel.component.type``,
``otel.component.name``, and ``error.type`` on drops); records skipped because nobody
listened, and records cut to fit, have counters of their own. There is no
``otel.sdk.exporter.*.inflight``: an export writes each record before it returns, so
nothing is ever in flight when a reader collects.

Switched on as the SDK switches on its own metrics, by
``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED=true`` (reported through the exporter's
``meter_provider`` argument, else the global provider), or by calling ``instrument_metrics``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation, get_meter_provider
from opentelemetry.sdk.environment_variables import OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED

from opentelemetry_exporter_userevents._export.writer import ExportStats
from opentelemetry_exporter_userevents.version import __version__

_ERROR_TYPES = {
    "dropped_detached": "detached",
    "dropped_invalid": "invalid",
    "dropped_unregistered": "unregistered",
    "dropped_write_error": "write_error",
    "dropped_shutdown": "shutdown",
}
_UNITS = {"span": "{span}", "log": "{log_record}", "metric_data_point": "{data_point}"}
_numbers = itertools.count()


def internal_metrics_enabled() -> bool:
    """OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED, read as the SDK reads it (``true`` or
    ``false``, case-insensitive; default false)."""
    return os.environ.get(OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED, "").strip().lower() == "true"


def observe_stats(
    stats: ExportStats, signal: str, meter_provider: MeterProvider | None = None
) -> None:
    """Register observable counters for ``stats``; ``signal`` is ``span``, ``log`` or
    ``metric_data_point``."""
    provider = meter_provider if meter_provider is not None else get_meter_provider()
    meter = provider.get_meter("opentelemetry-exporter-userevents", __version__)
    component_type = f"user_events_{signal}_exporter"
    component = {
        "otel.component.type": component_type,
        "otel.component.name": f"{component_type}/{next(_numbers)}",
    }
    unit = _UNITS[signal]

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
