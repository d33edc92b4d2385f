# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Metric records back into the SDK's own types: one :class:`MetricPoint` per record, and
:func:`metrics_data` to group points into the ``MetricsData`` an exporter takes.

Numbers come back exactly as written (record.metric_values): integers as ints, doubles
from their bits. Grouping keeps record order: points of one metric stay in the order the
SDK collected them, so a batch rebuilds the SDK's own ``MetricsData``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import Exemplar
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Buckets,
    ExponentialHistogram,
    ExponentialHistogramDataPoint,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.flags import (
    METRIC_MAX_INT,
    METRIC_MIN_INT,
    METRIC_SUM_INT,
    METRIC_VALUE_BIG,
    METRIC_VALUE_INT,
)
from opentelemetry_exporter_userevents.record.plain_text import decode_plain
from opentelemetry_exporter_userevents.record.tracepoints import (
    METRIC_EXP_HISTOGRAM_KIND,
    METRIC_GAUGE_KIND,
    METRIC_HISTOGRAM_KIND,
    METRIC_SUM_KIND,
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


def _sdk_value(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_sdk_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _sdk_value(v) for k, v in value.items()}
    return value


def _attributes(text: str) -> dict[str, Any]:
    value = anyvalue.decode(text)
    if not isinstance(value, dict):
        raise ValueError("attributes are not a JSON object")
    return {k: _sdk_value(v) for k, v in value.items()}


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _number(value: Any) -> float:
    """A JSON number (int or float, never a bool), as it came."""
    if type(value) is not int and type(value) is not float:
        raise ValueError(f"not a number: {type(value).__name__}")
    return value


def _int(value: Any) -> int:
    if type(value) is not int:
        raise ValueError(f"not an integer: {type(value).__name__}")
    return value


def _numbers(values: Any, whole: bool = False) -> list[Any]:
    """A JSON list of numbers (``whole``: of non-negative ints)."""
    if not isinstance(values, list):
        raise ValueError("not a JSON list")
    for value in values:
        if whole and (type(value) is not int or value < 0):
            raise ValueError("not a count")
        _number(value)
    return values


def _exemplars(text: str) -> list[Exemplar]:
    exemplars = []
    items = anyvalue.decode(text)
    if not isinstance(items, list):
        raise ValueError("exemplars are not a JSON list")
    for item in map(_object, items):
        trace_id = item.get(mv.TRACE_ID)
        span_id = item.get(mv.SPAN_ID)
        exemplars.append(
            Exemplar(
                {k: _sdk_value(v) for k, v in _object(item[mv.ATTRIBUTES]).items()},
                _number(item[mv.VALUE]),
                _int(item[mv.TIME_NS]),
                int(span_id, 16) if span_id is not None else None,
                int(trace_id, 16) if trace_id is not None else None,
            )
        )
    return exemplars


def _bits(bits: int, flags: int, int_flag: int) -> float:
    return mv.bits_s64(bits) if flags & int_flag else mv.bits_double(bits)


_KINDS = {
    METRIC_SUM_KIND: mv.KIND_SUM,
    METRIC_GAUGE_KIND: mv.KIND_GAUGE,
    METRIC_HISTOGRAM_KIND: mv.KIND_HISTOGRAM,
    METRIC_EXP_HISTOGRAM_KIND: mv.KIND_EXP_HISTOGRAM,
}


def rebuild_point(
    values: Mapping[str, Any],
    resource: Resource,
    scope: InstrumentationScope | None,
    tracepoint_kind: str | None = None,
) -> MetricPoint:
    """A MetricPoint from the fields of an ``otel_metric_*`` record; the tracepoint's kind
    (record.tracepoints METRIC_KINDS) says which, else the ``kind`` field. Raises
    ValueError, TypeError or KeyError for a record whose texts do not decode."""
    kind = _KINDS[tracepoint_kind] if tracepoint_kind is not None else values["kind"]
    attributes = _attributes(values["attributes"])
    exemplars = _exemplars(values["exemplars"])
    start, end = values["start_time_ns"], values["time_ns"]
    flags = values["flags"]
    point: Point
    if kind in (mv.KIND_SUM, mv.KIND_GAUGE):
        value: float
        if flags & METRIC_VALUE_BIG:
            value = anyvalue.decode(values["value_text"])
            if type(value) is not int:
                raise ValueError("value_text is not an integer")
        elif flags & METRIC_VALUE_INT:
            value = values["value"]
        else:
            value = mv.bits_double(values["value_bits"])
        point = NumberDataPoint(attributes, start, end, value, exemplars)
    elif kind in (mv.KIND_HISTOGRAM, mv.KIND_EXP_HISTOGRAM):
        buckets = _object(anyvalue.decode(values["buckets"]))
        total = _bits(values["sum_bits"], flags, METRIC_SUM_INT)
        low = _bits(values["min_bits"], flags, METRIC_MIN_INT)
        high = _bits(values["max_bits"], flags, METRIC_MAX_INT)
        if kind == mv.KIND_HISTOGRAM:
            point = HistogramDataPoint(
                attributes,
                start,
                end,
                values["count"],
                total,
                tuple(_numbers(buckets[mv.COUNTS], whole=True)),
                tuple(_numbers(buckets[mv.BOUNDS])),
                low,
                high,
                exemplars,
            )
        else:
            positive, negative = _object(buckets[mv.POSITIVE]), _object(buckets[mv.NEGATIVE])
            point = ExponentialHistogramDataPoint(
                attributes,
                start,
                end,
                values["count"],
                total,
                _int(buckets[mv.SCALE]),
                _int(buckets[mv.ZERO_COUNT]),
                Buckets(_int(positive[mv.OFFSET]), _numbers(positive[mv.COUNTS], whole=True)),
                Buckets(_int(negative[mv.OFFSET]), _numbers(negative[mv.COUNTS], whole=True)),
                _int(buckets[mv.FLAGS]),
                low,
                high,
                exemplars,
            )
    else:
        raise ValueError(f"unknown metric kind {kind}")
    temporality = values["temporality"]
    return MetricPoint(
        resource,
        scope,
        decode_plain(values["name"]),
        decode_plain(values["description"]),
        decode_plain(values["unit"]),
        kind,
        AggregationTemporality(temporality) if temporality else None,
        bool(values.get("is_monotonic", 0)),
        point,
        values["dropped_attributes"],
        values["dropped_exemplars"],
        values["truncated"],
    )


def _data(first: MetricPoint, points: list[Point]) -> Any:
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
