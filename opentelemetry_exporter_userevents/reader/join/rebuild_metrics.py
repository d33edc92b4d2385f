# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Metric records back into the SDK's own types: one :class:`MetricPoint` per record, and
:func:`metrics_data` to group points into the ``MetricsData`` an exporter takes.

Numbers come back exactly as written (record.metric_values): integers as ints, doubles
from their bits. Grouping keeps record order: points of one metric stay in the order the
SDK collected them, so a batch rebuilds the SDK's own ``MetricsData``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents.reader.decode.checked_records import CheckedMetric
from opentelemetry_exporter_userevents.reader.join.sdk_values import sdk_attributes
from opentelemetry_exporter_userevents.record import metric_values as mv

if TYPE_CHECKING:  # imported where a metric point is first built: a reader of spans and
    # logs alone never loads the SDK's metrics (a tenth of its start, measured)
    from opentelemetry.sdk.metrics import Exemplar
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        Buckets,
        ExponentialHistogramDataPoint,
        HistogramDataPoint,
        MetricsData,
        NumberDataPoint,
    )

    Point = NumberDataPoint | HistogramDataPoint | ExponentialHistogramDataPoint


@dataclass(frozen=True)
class MetricPoint:
    """One rebuilt data point with its metric's identity."""

    resource: Resource
    scope: InstrumentationScope | None
    name: str
    description: str
    unit: str
    kind: int
    """record.metric_values KIND_*."""
    temporality: AggregationTemporality | None
    monotonic: bool
    point: Point
    dropped_attributes: int = 0
    dropped_exemplars: int = 0
    truncated: int = 0


class _PointClasses(NamedTuple):
    """The SDK's classes a point is built of, looked up once (:func:`_point_classes`)."""

    exemplar: type[Exemplar]
    aggregation_temporality: type[AggregationTemporality]
    buckets: type[Buckets]
    number_point: type[NumberDataPoint]
    histogram_point: type[HistogramDataPoint]
    exponential_histogram_point: type[ExponentialHistogramDataPoint]


@cache
def _point_classes() -> _PointClasses:
    """Imported at the first metric point (see TYPE_CHECKING above), then taken from the
    cache: an import statement in :func:`rebuild_point` would cost every point 0.7 µs."""
    from opentelemetry.sdk.metrics import Exemplar, export  # noqa: PLC0415

    return _PointClasses(
        Exemplar,
        export.AggregationTemporality,
        export.Buckets,
        export.NumberDataPoint,
        export.HistogramDataPoint,
        export.ExponentialHistogramDataPoint,
    )


def rebuild_point(
    checked: CheckedMetric, resource: Resource, scope: InstrumentationScope | None
) -> MetricPoint:
    """A MetricPoint from a checked ``otel_metric_*`` record (:mod:`.validation`)."""
    sdk = _point_classes()
    attributes = sdk_attributes(checked.attributes)
    exemplars = [
        sdk.exemplar(
            sdk_attributes(exemplar.attributes),
            exemplar.value,
            exemplar.time_ns,
            exemplar.span_id,
            exemplar.trace_id,
        )
        for exemplar in checked.exemplars
    ]
    start, end = checked.start_time_ns, checked.time_ns
    kind = checked.kind
    point: Point
    if kind in (mv.KIND_SUM, mv.KIND_GAUGE):
        point = sdk.number_point(attributes, start, end, checked.value, exemplars)
    elif kind == mv.KIND_HISTOGRAM:
        point = sdk.histogram_point(
            attributes,
            start,
            end,
            checked.measurements,
            checked.sum,
            tuple(checked.counts),
            tuple(checked.bounds),
            checked.min,
            checked.max,
            exemplars,
        )
    else:
        point = sdk.exponential_histogram_point(
            attributes,
            start,
            end,
            checked.measurements,
            checked.sum,
            checked.scale,
            checked.zero_count,
            sdk.buckets(*checked.positive),
            sdk.buckets(*checked.negative),
            checked.histogram_flags,
            checked.min,
            checked.max,
            exemplars,
        )
    temporality = checked.temporality
    return MetricPoint(
        resource,
        scope,
        checked.name,
        checked.description,
        checked.unit,
        kind,
        sdk.aggregation_temporality(temporality) if temporality else None,
        checked.monotonic,
        point,
        checked.dropped_attributes,
        checked.dropped_exemplars,
        checked.truncated,
    )


def _data(first: MetricPoint, points: list[Point]) -> Any:
    from opentelemetry.sdk.metrics.export import (  # noqa: PLC0415 - see TYPE_CHECKING
        AggregationTemporality,
        ExponentialHistogram,
        Gauge,
        Histogram,
        Sum,
    )

    temporality = first.temporality or AggregationTemporality.UNSPECIFIED
    if first.kind == mv.KIND_SUM:
        return Sum(points, temporality, first.monotonic)  # type: ignore[arg-type]
    if first.kind == mv.KIND_GAUGE:
        return Gauge(points)  # type: ignore[arg-type]
    if first.kind == mv.KIND_HISTOGRAM:
        return Histogram(points, temporality)  # type: ignore[arg-type]
    return ExponentialHistogram(points, temporality)  # type: ignore[arg-type]


def metrics_data(points: Sequence[MetricPoint]) -> MetricsData:
    """``points`` grouped by resource, scope and metric, in the order they came."""
    from opentelemetry.sdk.metrics.export import (  # noqa: PLC0415 - see TYPE_CHECKING
        Metric,
        MetricsData,
        ResourceMetrics,
        ScopeMetrics,
    )

    resources: dict[Resource, dict[Any, dict[Any, list[MetricPoint]]]] = {}
    for item in points:
        scopes = resources.setdefault(item.resource, {})
        metrics = scopes.setdefault(item.scope, {})
        identity = (
            item.name,
            item.description,
            item.unit,
            item.kind,
            item.temporality,
            item.monotonic,
        )
        metrics.setdefault(identity, []).append(item)
    resource_metrics = []
    for resource, scopes in resources.items():
        scope_metrics = []
        for scope, metrics in scopes.items():
            built = [
                Metric(
                    group[0].name,
                    group[0].description,
                    group[0].unit,
                    _data(group[0], [p.point for p in group]),
                )
                for group in metrics.values()
            ]
            scope = scope or InstrumentationScope("")
            scope_metrics.append(ScopeMetrics(scope, built, scope.schema_url or ""))
        resource_metrics.append(ResourceMetrics(resource, scope_metrics, resource.schema_url))
    return MetricsData(resource_metrics)
