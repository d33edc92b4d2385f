# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""One data point as one ``otlp_metrics`` record (:mod:`..record.otlp_metrics`), as
opentelemetry-rust-contrib's ``opentelemetry-user-events-metrics`` writes it
(``src/exporter/mod.rs``, ``src/tracepoint/mod.rs``): an OTLP ``ExportMetricsServiceRequest``
of the point's resource, its scope, its metric and the point alone, in protobuf.

The messages are opentelemetry-proto's generated classes (the ``eventheader`` extra), filled
as the SDK's OTLP encoder fills them (``encode_metrics``), so a reader rebuilds the point the
SDK made. Where that encoder would fail or drop silently, this one keeps the value: an
integer beyond int64 as its decimal text (attributes) or as the nearest double (point and
exemplar values); a text with an unpaired surrogate with U+FFFD in its place. Anything else
it cannot encode raises, and the exporter counts the point in ``dropped_invalid``.

A request larger than its limit (the smaller of the Rust exporter's 65,360 bytes and
``max_record_size`` less the 16 bytes before the buffer) is not cut: OTLP has no way to say
a point was cut, so it raises ValueError, and the exporter counts it in ``dropped_invalid``
(as the Rust exporter drops it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from opentelemetry_exporter_userevents._export.metric_encoder import PointItem
from opentelemetry_exporter_userevents._export.redaction import Redactor, redact_attributes
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.otlp_metrics import HEADER_SIZE, MAX_BUFFER, payload

MAX_RESOURCES_KEPT = 16
"""Resources kept encoded (a process has one or a few); past this the cache starts again."""
MAX_SCOPES_KEPT = 256
"""Instrumentation scopes kept encoded; past this the cache starts again."""
_I64 = range(-(1 << 63), 1 << 63)


def load_protobuf() -> SimpleNamespace:
    """opentelemetry-proto's classes this encoder fills. Raises ImportError (or whatever
    importing protobuf raises) when they cannot be had."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # noqa: PLC0415
        ExportMetricsServiceRequest,
    )
    from opentelemetry.proto.common.v1 import common_pb2  # noqa: PLC0415
    from opentelemetry.proto.metrics.v1 import metrics_pb2  # noqa: PLC0415
    from opentelemetry.proto.resource.v1 import resource_pb2  # noqa: PLC0415

    return SimpleNamespace(
        Request=ExportMetricsServiceRequest,
        AnyValue=common_pb2.AnyValue,
        KeyValue=common_pb2.KeyValue,
        Scope=common_pb2.InstrumentationScope,
        Resource=resource_pb2.Resource,
        Buckets=metrics_pb2.ExponentialHistogramDataPoint.Buckets,
    )


def _text(text: str) -> str:
    """``text`` as protobuf takes it: an unpaired surrogate (no UTF-8 holds one) as U+FFFD."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


class OtlpMetricsEncoder:
    """Encodes points for one exporter: its resources (through ``redact``, as every
    attribute that leaves the process) and scopes are encoded once and kept (bounded)."""

    def __init__(self, proto: SimpleNamespace, redact: Redactor | None) -> None:
        self._pb = proto
        self._redact = redact
        self._resources: dict[int, tuple[Any, Any]] = {}
        self._scopes: dict[int, tuple[Any, Any]] = {}

    def encode(self, item: PointItem, resource_id: int, max_size: int) -> tuple[bytes, bool]:
        """The record of one point (``resource_id`` is not used: the request carries the
        resource). Raises ValueError for a request over the limit, and whatever a value
        that cannot be encoded raises."""
        request = self._pb.Request()
        resource_metrics = request.resource_metrics.add()
        resource_metrics.resource.CopyFrom(self._resource(item.resource))
        resource_metrics.schema_url = _text(item.resource.schema_url or "")
        scope_metrics = resource_metrics.scope_metrics.add()
        if item.scope is not None:
            scope_metrics.scope.CopyFrom(self._scope(item.scope))
            scope_metrics.schema_url = _text(item.scope.schema_url or "")
        metric = scope_metrics.metrics.add()
        metric.name = _text(item.name)
        metric.description = _text(item.description or "")
        metric.unit = _text(item.unit or "")
        _POINTS[item.kind](self, metric, item)
        buffer = request.SerializeToString()
        limit = min(MAX_BUFFER, max_size - HEADER_SIZE)
        if len(buffer) > limit:
            raise ValueError(f"an OTLP request of {len(buffer)} bytes, over its {limit}-byte limit")
        return payload(buffer), False

    def _resource(self, resource: Any) -> Any:
        kept = self._resources.get(id(resource))
        if kept is None or kept[0] is not resource:
            attributes = resource.attributes
            if self._redact is not None:
                attributes = redact_attributes(attributes, self._redact)
            kept = (resource, self._pb.Resource(attributes=self._attributes(attributes)))
            if len(self._resources) >= MAX_RESOURCES_KEPT:
                self._resources.clear()
            self._resources[id(resource)] = kept
        return kept[1]

    def _scope(self, scope: Any) -> Any:
        kept = self._scopes.get(id(scope))
        if kept is None or kept[0] is not scope:
            encoded = self._pb.Scope(
                name=_text(scope.name or ""),
                version=_text(scope.version or ""),
                attributes=self._attributes(scope.attributes),
            )
            kept = (scope, encoded)
            if len(self._scopes) >= MAX_SCOPES_KEPT:
                self._scopes.clear()
            self._scopes[id(scope)] = kept
        return kept[1]

    def _attributes(self, attributes: Mapping[str, Any] | None) -> list[Any]:
        key_value = self._pb.KeyValue
        return [
            key_value(key=_text(key), value=self._value(value))
            for key, value in (attributes or {}).items()
        ]

    def _value(self, value: Any) -> Any:
        """An attribute value as the SDK's OTLP encoder writes it (None: an empty value)."""
        any_value = self._pb.AnyValue
        if value is None:
            return any_value()
        if isinstance(value, bool):
            return any_value(bool_value=value)
        if isinstance(value, str):
            return any_value(string_value=_text(value))
        if isinstance(value, int):
            if value in _I64:
                return any_value(int_value=value)
            return any_value(string_value=str(value))
        if isinstance(value, float):
            return any_value(double_value=value)
        if isinstance(value, bytes):
            return any_value(bytes_value=value)
        if isinstance(value, Sequence):
            return any_value(array_value={"values": [self._value(v) for v in value]})
        if isinstance(value, Mapping):
            values = [
                self._pb.KeyValue(key=_text(str(k)), value=self._value(v)) for k, v in value.items()
            ]
            return any_value(kvlist_value={"values": values})
        raise TypeError(f"an attribute value of type {type(value).__name__}")

    def _point(self, point: Any, out: Any) -> None:
        """What every kind of point has: attributes, times, exemplars."""
        out.attributes.extend(self._attributes(point.attributes))
        if point.start_time_unix_nano:
            out.start_time_unix_nano = point.start_time_unix_nano
        out.time_unix_nano = point.time_unix_nano
        for exemplar in point.exemplars:
            encoded = out.exemplars.add()
            encoded.time_unix_nano = exemplar.time_unix_nano
            encoded.filtered_attributes.extend(self._attributes(exemplar.filtered_attributes))
            if exemplar.span_id is not None and exemplar.trace_id is not None:
                encoded.span_id = exemplar.span_id.to_bytes(8, "big")
                encoded.trace_id = exemplar.trace_id.to_bytes(16, "big")
            _number(encoded, exemplar.value)

    def _number_point(self, metric: Any, item: PointItem) -> None:
        if item.kind == mv.KIND_SUM:
            data = metric.sum
            data.aggregation_temporality = item.temporality
            data.is_monotonic = item.monotonic
        else:
            data = metric.gauge
        point: Any = item.point
        out = data.data_points.add()
        self._point(point, out)
        _number(out, point.value)

    def _histogram_point(self, metric: Any, item: PointItem) -> None:
        metric.histogram.aggregation_temporality = item.temporality
        point: Any = item.point
        out = metric.histogram.data_points.add()
        self._point(point, out)
        out.count = point.count
        out.sum = point.sum
        out.bucket_counts.extend(point.bucket_counts)
        out.explicit_bounds.extend(point.explicit_bounds)
        out.min = point.min
        out.max = point.max

    def _exponential_point(self, metric: Any, item: PointItem) -> None:
        metric.exponential_histogram.aggregation_temporality = item.temporality
        point: Any = item.point
        out = metric.exponential_histogram.data_points.add()
        self._point(point, out)
        out.count = point.count
        out.sum = point.sum
        out.scale = point.scale
        out.zero_count = point.zero_count
        for side, buckets in ((out.positive, point.positive), (out.negative, point.negative)):
            if buckets.bucket_counts:
                side.offset = buckets.offset
                side.bucket_counts.extend(buckets.bucket_counts)
        out.flags = point.flags
        out.min = point.min
        out.max = point.max


def _number(out: Any, value: Any) -> None:
    """``as_int`` for an int64, else ``as_double`` (an integer beyond int64: the nearest
    double; beyond the doubles, OverflowError)."""
    if isinstance(value, int) and value in _I64:
        out.as_int = value
    elif isinstance(value, (int, float)):
        out.as_double = float(value)
    else:
        raise TypeError(f"a point or exemplar value of type {type(value).__name__}")


_POINTS = {
    mv.KIND_SUM: OtlpMetricsEncoder._number_point,
    mv.KIND_GAUGE: OtlpMetricsEncoder._number_point,
    mv.KIND_HISTOGRAM: OtlpMetricsEncoder._histogram_point,
    mv.KIND_EXP_HISTOGRAM: OtlpMetricsEncoder._exponential_point,
}
