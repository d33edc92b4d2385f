# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsMetricExporter: each data point as one ``<prefix>_metric_<kind>`` record (with
``format="eventheader"``, as one OTLP request on ``otlp_metrics``, as the EventHeader
pipelines' metric exporters write it), and UserEventsMetricReader, which skips its whole
collect cycle (instrument callbacks and aggregation included) while no tracer listens to
any metric tracepoint."""

from __future__ import annotations

import logging
import math
import os
import threading
import weakref
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION,
    OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE,
    OTEL_METRIC_EXPORT_INTERVAL,
    OTEL_METRIC_EXPORT_TIMEOUT,
)
from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
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

from opentelemetry_exporter_userevents._export.config import DEFAULT_FORMAT, EVENTHEADER
from opentelemetry_exporter_userevents._export.exporter_base import Encoder, ExporterBase
from opentelemetry_exporter_userevents._export.metric_encoder import (
    PointItem,
    encode_point,
    redact_point,
    temporality_value,
)
from opentelemetry_exporter_userevents._export.otlp_metrics_encoder import (
    OtlpMetricsEncoder,
    load_protobuf,
)
from opentelemetry_exporter_userevents._export.redaction import Redactor
from opentelemetry_exporter_userevents.abi.user_events import Registration, enable_word
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record import otlp_metrics
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
_warned_no_protobuf = False


def _protobuf() -> SimpleNamespace | None:
    """opentelemetry-proto's classes for the ``eventheader`` format; without them, one
    warning a process and None (the exporter writes the default format)."""
    global _warned_no_protobuf
    try:
        return load_protobuf()
    except Exception as exc:  # noqa: BLE001 - ImportError, or a protobuf that cannot load
        if not _warned_no_protobuf:
            _warned_no_protobuf = True
            _logger.warning(
                "user_events metric exporter: format 'eventheader' writes OTLP protobuf, "
                "which needs opentelemetry-proto (pip install "
                "'opentelemetry-exporter-userevents[eventheader]'): %s: %.200s; writing "
                "metrics in the default format",
                type(exc).__name__,
                exc,
            )
        return None


def _temporality() -> dict[type, AggregationTemporality]:
    """OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE read as the OTLP exporters read it
    (cumulative by default; delta; lowmemory); synchronous gauges cumulative, as every
    reader makes an instrument the exporter does not name."""
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
    }  # synchronous gauges: the reader's default, cumulative (the SDK names their class
    # only privately; tests/test_metric_exporter.py checks what a gauge gets)


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
    is listened to. Settings and ``redact`` as for UserEventsSpanExporter (``redact`` sees
    the resource's attributes too in the ``eventheader`` format, whose records carry them);
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
        user_events_data: str | None = None,
        multi_format: bool | None = None,
        format: str | None = None,  # noqa: A002 - the option's name everywhere
        redact: Redactor | None = None,
        preferred_temporality: dict[type, AggregationTemporality] | None = None,
        preferred_aggregation: dict[type, Aggregation] | None = None,
        meter_provider: MeterProvider | None = None,
        **kwargs: Any,
    ) -> None:
        arguments = {
            "prefix": prefix,
            "max_record_size": max_record_size,
            "resource_interval_millis": resource_interval_millis,
            "tracefs": tracefs,
            "user_events_data": user_events_data,
            "multi_format": multi_format,
            **kwargs,
        }
        config = self.settings(**arguments, format=format)
        proto = _protobuf() if config.format == EVENTHEADER else None
        if config.format == EVENTHEADER and proto is None:
            config = self.settings(**{**arguments, "format": DEFAULT_FORMAT})
        if proto is not None:
            tracepoints = {otlp_metrics.NAME: (otlp_metrics.NAME, otlp_metrics.TRACEPOINT)}
        else:
            tracepoints = {
                kind: (metric_tracepoint(config.prefix, kind), schema)
                for kind, schema in METRIC_KINDS.items()
            }
        ExporterBase.__init__(self, tracepoints, config, redact, meter_provider)
        self._encode: Encoder = encode_point
        if proto is not None:
            self._encode = OtlpMetricsEncoder(proto, self._redact).encode
        MetricExporter.__init__(
            self,
            preferred_temporality={**_temporality(), **(preferred_temporality or {})},
            preferred_aggregation={**_aggregation(), **(preferred_aggregation or {})},
        )
        self.registrations: dict[str, Registration | None] = {
            key: self._writer.registrations[key] for key in tracepoints
        }
        """Each tracepoint's registration: one per kind, or ``otlp_metrics`` alone."""
        self._by_kind = {
            k: self.registrations.get(name, self.registrations.get(otlp_metrics.NAME))
            for k, name in _KIND_NAMES.items()
        }
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
        if self._export_items(points, self._route, self._encode, redact_point):
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
    since the last cycle that ran; cumulative points are unaffected.

    The SDK's reader runs without its own thread (an infinite interval, its public way to
    collect only on demand); this one's thread calls ``collect`` each interval while
    listened, and once more at shutdown, as the SDK's does."""

    def __init__(
        self,
        exporter: UserEventsMetricExporter | None = None,
        export_interval_millis: float | None = None,
        export_timeout_millis: float | None = None,
        cardinality_limits: Any = None,
        **exporter_options: Any,
    ) -> None:
        """``exporter_options`` make the exporter when none is given (the configurator
        passes the exporter's settings this way). The interval and timeout default to
        OTEL_METRIC_EXPORT_INTERVAL and OTEL_METRIC_EXPORT_TIMEOUT, as the SDK's."""
        if exporter is None:
            exporter = UserEventsMetricExporter(**exporter_options)
        self.exporter = exporter
        self.skipped = 0
        """Collect cycles skipped because nobody listened."""
        self.export_interval_millis = _millis(
            export_interval_millis, OTEL_METRIC_EXPORT_INTERVAL, 60_000, "export interval"
        )
        self.export_timeout_millis = _millis(
            export_timeout_millis, OTEL_METRIC_EXPORT_TIMEOUT, 30_000, "export timeout"
        )
        if self.export_interval_millis <= 0:
            raise ValueError(
                f"interval value {self.export_interval_millis} is invalid and needs to be "
                "larger than zero."
            )
        limits = {} if cardinality_limits is None else {"cardinality_limits": cardinality_limits}
        super().__init__(exporter, math.inf, self.export_timeout_millis, **limits)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.export_interval_millis < math.inf:
            self._start()
            if hasattr(os, "register_at_fork"):
                start = weakref.WeakMethod(self._start)

                def restart_in_child() -> None:  # the parent's thread is not in the child
                    method = start()
                    if method is not None:
                        method()

                os.register_at_fork(after_in_child=restart_in_child)

    def _start(self) -> None:
        if self._stop.is_set():
            return
        self._thread = threading.Thread(
            name="UserEventsMetricReader", target=self._run, daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        interval = self.export_interval_millis / 1e3
        while not self._stop.wait(interval):
            self._collect_if_listened(self.export_timeout_millis)
        self._collect_if_listened(self.export_timeout_millis)  # the last one, as the SDK's

    def _collect_if_listened(self, timeout_millis: float) -> None:
        if not self.exporter.listened:
            self.skipped += 1
            return
        try:
            self.collect(timeout_millis=timeout_millis)
        except Exception:  # noqa: BLE001 - a timeout or a callback's error; next cycle retries
            _logger.warning("Metric collection failed", exc_info=True)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        if self.exporter.listened:
            return super().force_flush(timeout_millis=timeout_millis)
        self.skipped += 1
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        """Stop the thread after its last cycle, then the SDK's shutdown (the exporter's)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_millis / 1e3)
        super().shutdown(timeout_millis=timeout_millis, **kwargs)


def _millis(value: float | None, variable: str, default: float, what: str) -> float:
    """``value``, else the environment variable read as the SDK reads it."""
    if value is not None:
        return float(value)
    try:
        return float(os.environ.get(variable, default))
    except ValueError:
        _logger.warning("Found invalid value for %s, using default", what)
        return float(default)
