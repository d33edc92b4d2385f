# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsMetricExporter: each data point as one ``<prefix>_metric_<kind>`` record, and
UserEventsMetricReader, which skips its whole collect cycle (instrument callbacks and
aggregation included) while no tracer listens to any metric tracepoint."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION,
    OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE,
)
from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics import _Gauge as Gauge
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    ExponentialHistogram,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
    Sum,
)
from opentelemetry.sdk.metrics.export import Gauge as GaugeData
from opentelemetry.sdk.metrics.export import Histogram as HistogramData
from opentelemetry.sdk.metrics.view import (
    Aggregation,
    ExplicitBucketHistogramAggregation,
    ExponentialBucketHistogramAggregation,
)

from opentelemetry_exporter_userevents._export.exporter_base import ExporterBase
from opentelemetry_exporter_userevents._export.metric_encoder import (
    PointItem,
    encode_point,
    redact_point,
    temporality_value,
)
from opentelemetry_exporter_userevents._export.redaction import Redactor
from opentelemetry_exporter_userevents.abi.user_events import Registration, enable_word
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.tracepoints import (
    METRIC_EXP_HISTOGRAM_KIND,
    METRIC_GAUGE_KIND,
    METRIC_HISTOGRAM_KIND,
    METRIC_KINDS,
    METRIC_SUM_KIND,
    metric_tracepoint,
)

__all__ = ["UserEventsMetricExporter", "UserEventsMetricReader"]

_logger = logging.getLogger(__name__)

_KIND_NAMES = {
    mv.KIND_SUM: METRIC_SUM_KIND,
    mv.KIND_GAUGE: METRIC_GAUGE_KIND,
    mv.KIND_HISTOGRAM: METRIC_HISTOGRAM_KIND,
    mv.KIND_EXP_HISTOGRAM: METRIC_EXP_HISTOGRAM_KIND,
}
_D, _C = AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE


def _temporality() -> dict[type, AggregationTemporality]:
    """OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE read as the OTLP exporters read it
    (cumulative by default; delta; lowmemory), synchronous gauges cumulative."""
    preference = os.environ.get(OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, "CUMULATIVE")
    preference = preference.upper().strip()
    counters = _D if preference in ("DELTA", "LOWMEMORY") else _C
    observable_counters = _D if preference == "DELTA" else _C
    if preference not in ("CUMULATIVE", "DELTA", "LOWMEMORY"):
        _logger.warning(
            "Unrecognized OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE value found: %s, "
            "using CUMULATIVE",
            preference,
        )
    return {
        Counter: counters,
        UpDownCounter: _C,
        Histogram: counters,
        ObservableCounter: observable_counters,
        ObservableUpDownCounter: _C,
        ObservableGauge: _C,
        Gauge: _C,
    }


def _aggregation() -> dict[type, Aggregation]:
    """OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, as the OTLP exporters read it."""
    name = os.environ.get(
        OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, "explicit_bucket_histogram"
    )
    if name == "base2_exponential_bucket_histogram":
        return {Histogram: ExponentialBucketHistogramAggregation()}
    if name != "explicit_bucket_histogram":
        _logger.warning(
            "Invalid value for %s: %s, using explicit bucket histogram aggregation",
            OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION,
            name,
        )
    return {Histogram: ExplicitBucketHistogramAggregation()}


def data_points(metrics_data: MetricsData) -> Iterator[PointItem]:
    """Every data point of ``metrics_data`` with its metric's context, in order."""
    for resource_metrics in metrics_data.resource_metrics:
        resource = resource_metrics.resource
        for scope_metrics in resource_metrics.scope_metrics:
            scope = scope_metrics.scope
            for metric in scope_metrics.metrics:
                data = metric.data
                monotonic = False
                if isinstance(data, Sum):
                    kind, monotonic = mv.KIND_SUM, data.is_monotonic
                elif isinstance(data, GaugeData):
                    kind = mv.KIND_GAUGE
                elif isinstance(data, HistogramData):
                    kind = mv.KIND_HISTOGRAM
                elif isinstance(data, ExponentialHistogram):
                    kind = mv.KIND_EXP_HISTOGRAM
                else:
                    continue
                temporality = temporality_value(getattr(data, "aggregation_temporality", None))
                for point in data.data_points:
                    yield PointItem(
                        resource,
                        scope,
                        metric.name,
                        metric.description,
                        metric.unit,
                        point,
                        kind,
                        temporality,
                        monotonic,
                    )


class UserEventsMetricExporter(ExporterBase[PointItem], MetricExporter):
    """Writes each data point as one user_events record, only while its kind's tracepoint
    is listened to. Settings and ``redact`` as for UserEventsSpanExporter;
    ``preferred_temporality`` and ``preferred_aggregation`` default to what
    OTEL_EXPORTER_OTLP_METRICS_* say, as for the OTLP exporters. ``export`` never raises.

    Pair it with :class:`UserEventsMetricReader` so nothing is collected while nobody
    listens."""

    _signal = "metric_data_point"
    _item_name = "a metric data point"

    def __init__(
        self,
        *,
        prefix: str | None = None,
        max_record_size: int | None = None,
        resource_interval_millis: int | None = None,
        tracefs: str | None = None,
        multi_format: bool | None = None,
        redact: Redactor | None = None,
        preferred_temporality: dict[type, AggregationTemporality] | None = None,
        preferred_aggregation: dict[type, Aggregation] | None = None,
        meter_provider: MeterProvider | None = None,
        **kwargs: Any,
    ) -> None:
        config = self.settings(
            prefix=prefix,
            max_record_size=max_record_size,
            resource_interval_millis=resource_interval_millis,
            tracefs=tracefs,
            multi_format=multi_format,
            **kwargs,
        )
        tracepoints = {
            kind: (metric_tracepoint(config.prefix, kind), schema)
            for kind, schema in METRIC_KINDS.items()
        }
        ExporterBase.__init__(self, tracepoints, config, redact, meter_provider)
        MetricExporter.__init__(
            self,
            preferred_temporality={**_temporality(), **(preferred_temporality or {})},
            preferred_aggregation={**_aggregation(), **(preferred_aggregation or {})},
        )
        self.registrations: dict[str, Registration | None] = {
            kind: self._writer.registrations[kind] for kind in METRIC_KINDS
        }
        self._by_kind = {k: self.registrations[name] for k, name in _KIND_NAMES.items()}
        self._enable_words = [enable_word(r) for r in self.registrations.values()]

    @property
    def listened(self) -> bool:
        """True while a tracer listens to any of the metric tracepoints."""
        return any(word[0] for word in self._enable_words)

    def _route(self, item: PointItem) -> Registration | None:
        return self._by_kind[item.kind]

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        try:
            points = list(data_points(metrics_data))
        except Exception as exc:  # noqa: BLE001 - not MetricsData: say so, never raise
            self._writer.report(
                ("not MetricsData", type(exc)),
                "user_events: export() was given no MetricsData (%s: %.200s); nothing written",
                type(exc).__name__,
                exc,
            )
            return MetricExportResult.FAILURE
        if self._export_items(points, self._route, encode_point, redact_point):
            return MetricExportResult.SUCCESS
        return MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._shut_down()


class UserEventsMetricReader(PeriodicExportingMetricReader):
    """The SDK's periodic reader, except that a cycle while no tracer listens to any metric
    tracepoint collects nothing: no callbacks, no aggregation, no export (counted in
    :attr:`skipped`). A listener sees the next cycle: delta points then cover the time
    since the last cycle that ran; cumulative points are unaffected."""

    def __init__(
        self,
        exporter: UserEventsMetricExporter | None = None,
        export_interval_millis: float | None = None,
        export_timeout_millis: float | None = None,
        cardinality_limits: Any = None,
        **exporter_options: Any,
    ) -> None:
        """``exporter_options`` make the exporter when none is given (the configurator
        passes the exporter's settings this way)."""
        if exporter is None:
            exporter = UserEventsMetricExporter(**exporter_options)
        self.exporter = exporter
        self.skipped = 0
        """Collect cycles skipped because nobody listened."""
        super().__init__(
            exporter, export_interval_millis, export_timeout_millis, cardinality_limits
        )

    def _collect_if_listened(self, timeout_millis: float) -> None:
        if not self.exporter.listened:
            self.skipped += 1
            return
        try:
            self.collect(timeout_millis=timeout_millis)
        except Exception:  # noqa: BLE001 - a timeout or a callback's error; next cycle retries
            _logger.warning("Metric collection failed", exc_info=True)

    def _ticker(self) -> None:
        interval = self._export_interval_millis / 1e3
        while not self._shutdown_event.wait(interval):
            self._collect_if_listened(self._export_timeout_millis)
        self._collect_if_listened(self._export_interval_millis)  # the last one, as the SDK's

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        if self.exporter.listened:
            return super().force_flush(timeout_millis=timeout_millis)
        self.skipped += 1
        return True
