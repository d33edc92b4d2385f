# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The validation boundary for ``otlp_metrics`` records (:mod:`.otlp_metrics`): the OTLP
``ExportMetricsServiceRequest`` in a record's buffer, parsed and turned into the checked
metric points and resources our own metric records become, or dropped and counted by a
reason from a fixed vocabulary (never the writer's text).

The buffer is parsed with opentelemetry-proto's generated classes (the ``reader`` extra
installs them: the OTLP encoder the outputs use depends on them), not with a protobuf reader
of our own: protobuf's C parser (upb) checks every length, tag and UTF-8 string, refuses
messages nested deeper than its recursion limit, and its cost is bounded by the buffer,
which the kernel bounds (:data:`.otlp_metrics.MAX_BUFFER`). What the parse cannot bound is
how much one record may expand into: the counts of resources, scopes, metrics, points,
attributes, values, buckets and exemplars, and the nesting of attribute values, are bounded
here (the ``MAX_*`` constants); past one, the record is dropped whole and counted.

A point that OTLP carries but the SDK's metric data cannot (a summary, a number point with
no value, an attribute with nothing set, ids of the wrong size, bucket counts that do not
fit their bounds) is dropped alone and counted by its reason; the points beside it are
kept. The producers write one point per record (docs/common-schema.md), so in practice a
bad point is a bad record.

A request's resource has no record of its own: like an EventHeader writer's, it comes beside
the points, with an id that is a hash of its attributes in a domain of its own, so no writer
can make the id of a resource one of our exporters announced.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, NamedTuple

from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    Attributes,
    CheckedExemplar,
    CheckedMetric,
    CheckedResource,
    CheckedScope,
)
from opentelemetry_exporter_userevents.reader.decode.otlp_metrics import (
    BUFFER,
    PROTOCOL,
    VERSION,
)
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record import otlp_metrics as wire
from opentelemetry_exporter_userevents.record.resource_id import hash_resource

PROTOCOL_PROTOBUF = wire.PROTOCOL_PROTOBUF
"""``protocol``: the buffer is protobuf (the only protocol either producer writes)."""
KNOWN_VERSIONS = (wire.VERSION,)
"""``version``: the OTLP protobuf definitions' version the producers name (both write
``v0.19.00``); a record of another is skipped and counted, not guessed at."""
MAX_RESOURCES = 16
"""Resource metrics in one request (the producers write one)."""
MAX_SCOPES = 64
"""Scope metrics in one request, all resources together."""
MAX_METRICS = 256
"""Metrics in one request, all scopes together."""
MAX_POINTS = 1024
"""Data points in one request, all metrics together (the producers write one)."""
MAX_ATTRIBUTES = 128
"""Attributes of one resource, scope, point or exemplar."""
MAX_VALUES = 1024
"""Values of one attribute, all its arrays and key-value lists together."""
MAX_DEPTH = 8
"""Arrays and key-value lists nested in one attribute value."""
MAX_BUCKETS = 4096
"""Bucket counts (and bounds) of one histogram side."""
MAX_EXEMPLARS = 64
"""Exemplars of one point."""
MAX_RESOURCES_KEPT = 1024
"""Resources kept built, by their attributes' text; past this the cache starts again."""
_DOMAIN = b"otlp_metrics\0"
_SCOPE_TEXT = "\0otlp_metrics "
"""Starts a checked scope's key: no JSON text of our records' scopes does."""
_TEMPORALITIES = range(3)


class CheckedRequest(NamedTuple):
    """What one ``otlp_metrics`` record holds, past the boundary."""

    resources: list[CheckedResource]
    """Each point's resource, learnt by the join before the points."""
    points: list[CheckedMetric]
    dropped: list[str]
    """The reason of each point dropped alone."""


class _PointDropped(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def resource_id(text: str) -> int:
    """The id of an ``otlp_metrics`` writer's resource, from its attributes' text."""
    return hash_resource(_DOMAIN + text.encode("utf-8", "surrogatepass"), b"")


@cache
def _request_class() -> Any:
    """Imported at the first record: a reader of other records never loads protobuf."""
    from opentelemetry.proto.collector.metrics.v1 import (  # noqa: PLC0415
        metrics_service_pb2,
    )

    return metrics_service_pb2.ExportMetricsServiceRequest


def _parse(buffer: bytes) -> Any:
    try:
        request_class = _request_class()
    except ImportError:
        raise InvalidRecord("otlp_metrics: opentelemetry-proto is not installed") from None
    request = request_class()
    try:
        request.ParseFromString(buffer)
    except Exception:  # noqa: BLE001 - DecodeError, or upb's RecursionError-like refusals
        raise InvalidRecord("otlp_metrics.buffer: not an ExportMetricsServiceRequest") from None
    return request


class OtlpMetricsChecker:
    """Parses and checks ``otlp_metrics`` records; resources, which repeat, are built once
    (a bounded cache)."""

    def __init__(self) -> None:
        self._resources: dict[tuple[str, str], CheckedResource] = {}

    def check(
        self, values: Mapping[str, Any], timestamp: int, pid: int, tracepoint: str
    ) -> CheckedRequest:
        """The checked points of a decoded ``otlp_metrics`` record and their resources.
        Raises :class:`.InvalidRecord` for a record dropped whole."""
        if values[PROTOCOL] != PROTOCOL_PROTOBUF:
            raise InvalidRecord("otlp_metrics.protocol: not 0 (protobuf)")
        if values[VERSION] not in KNOWN_VERSIONS:
            raise InvalidRecord("otlp_metrics.version: not a known version")
        request = _parse(values[BUFFER])
        _bound(request.resource_metrics, MAX_RESOURCES, "resources")
        scopes = metrics = points_in = 0
        for resource_metrics in request.resource_metrics:
            scopes += _bound(resource_metrics.scope_metrics, MAX_SCOPES - scopes, "scopes")
            for scope_metrics in resource_metrics.scope_metrics:
                metrics += _bound(scope_metrics.metrics, MAX_METRICS - metrics, "metrics")
                for metric in scope_metrics.metrics:
                    points_in += _bound(_data_points(metric), MAX_POINTS - points_in, "points")
        out = CheckedRequest([], [], [])
        where = (timestamp, pid, tracepoint)
        for resource_metrics in request.resource_metrics:
            try:
                resource = self._resource(resource_metrics)
                out.resources.append(resource)
                for scope_metrics in resource_metrics.scope_metrics:
                    scope_text, scope = _scope(scope_metrics)
                    for metric in scope_metrics.metrics:
                        _metric(metric, (scope_text, scope, resource.resource_id, *where), out)
            except _PointDropped as dropped:  # in a resource or a scope: not one point's
                raise InvalidRecord(dropped.reason) from None
        return out

    def _resource(self, resource_metrics: Any) -> CheckedResource:
        attributes = _attributes(resource_metrics.resource.attributes, "resource")
        schema_url = resource_metrics.schema_url
        key = (repr(sorted(attributes.items())), schema_url)
        resource = self._resources.get(key)
        if resource is None:
            rid = resource_id(f"{key[0]}\0{schema_url}")
            resource = CheckedResource(rid, attributes, schema_url)
            if len(self._resources) >= MAX_RESOURCES_KEPT:
                self._resources.clear()
            self._resources[key] = resource
        return resource


def _bound(items: Any, limit: int, what: str) -> int:
    if len(items) > limit:
        raise InvalidRecord(f"otlp_metrics.buffer: too many {what}")
    return len(items)


def _data_points(metric: Any) -> Any:
    data = metric.WhichOneof("data")
    return getattr(metric, data).data_points if data is not None else ()


def _scope(scope_metrics: Any) -> tuple[str, CheckedScope]:
    scope = scope_metrics.scope
    attributes = _attributes(scope.attributes, "scope")
    checked = CheckedScope(
        scope.name, scope.version or None, scope_metrics.schema_url or None, attributes
    )
    text = _SCOPE_TEXT + repr((checked[:3], sorted(attributes.items())))
    return text, checked


def _metric(metric: Any, joined: tuple[str, CheckedScope, int, int, int, str],
            out: CheckedRequest) -> None:  # fmt: skip
    """The points of ``metric``; ``joined``: what each point carries after its values
    (scope text, scope, resource id, timestamp, pid, tracepoint)."""
    data_kind = metric.WhichOneof("data")
    if data_kind is None:
        out.dropped.append("otlp_metrics.metric: no data")
        return
    if data_kind == "summary":
        out.dropped.extend(["otlp_metrics.metric: a summary (the SDK has none)"] * max(
            1, len(metric.summary.data_points)))  # fmt: skip
        return
    data = getattr(metric, data_kind)
    temporality = getattr(data, "aggregation_temporality", 0)
    if temporality not in _TEMPORALITIES:
        out.dropped.extend(["otlp_metrics.metric: an unknown temporality"] * len(data.data_points))
        return
    kind = _KINDS[data_kind]
    monotonic = bool(getattr(data, "is_monotonic", False))
    for point in data.data_points:
        try:
            fields = _POINTS[data_kind](point)
        except _PointDropped as dropped:
            out.dropped.append(dropped.reason)
            continue
        except InvalidRecord as invalid:
            out.dropped.append(invalid.reason)
            continue
        out.points.append(
            CheckedMetric._make(
                (kind, metric.name, metric.description, metric.unit, temporality, monotonic,
                 point.start_time_unix_nano, point.time_unix_nano, *fields,
                 0, 0, 0, *joined)
            )
        )  # fmt: skip


_KINDS = {
    "sum": mv.KIND_SUM,
    "gauge": mv.KIND_GAUGE,
    "histogram": mv.KIND_HISTOGRAM,
    "exponential_histogram": mv.KIND_EXP_HISTOGRAM,
}


def _number(point: Any) -> tuple[Any, ...]:
    which = point.WhichOneof("value")
    if which is None:
        raise _PointDropped("otlp_metrics.point: no value")
    attributes = _attributes(point.attributes, "point")
    return (attributes, _exemplars(point), getattr(point, which), 0, 0.0, 0.0, 0.0,
            [], [], 0, 0, (0, []), (0, []), 0)  # fmt: skip


def _histogram(point: Any) -> tuple[Any, ...]:
    counts = _buckets(point.bucket_counts, "bucket_counts")
    bounds = _buckets(point.explicit_bounds, "explicit_bounds")
    if counts and len(counts) != len(bounds) + 1:
        raise _PointDropped("otlp_metrics.point: bucket counts do not fit the bounds")
    attributes = _attributes(point.attributes, "point")
    return (attributes, _exemplars(point), 0, point.count, point.sum, point.min, point.max,
            bounds, counts, 0, 0, (0, []), (0, []), 0)  # fmt: skip


def _exponential(point: Any) -> tuple[Any, ...]:
    positive = (point.positive.offset, _buckets(point.positive.bucket_counts, "bucket_counts"))
    negative = (point.negative.offset, _buckets(point.negative.bucket_counts, "bucket_counts"))
    attributes = _attributes(point.attributes, "point")
    return (attributes, _exemplars(point), 0, point.count, point.sum, point.min, point.max,
            [], [], point.scale, point.zero_count, positive, negative, point.flags)  # fmt: skip


_POINTS = {"sum": _number, "gauge": _number, "histogram": _histogram,
           "exponential_histogram": _exponential}  # fmt: skip


def _buckets(values: Any, what: str) -> list[Any]:
    if len(values) > MAX_BUCKETS:
        raise InvalidRecord(f"otlp_metrics.buffer: too many {what}")
    return list(values)


def _exemplars(point: Any) -> list[CheckedExemplar]:
    if len(point.exemplars) > MAX_EXEMPLARS:
        raise InvalidRecord("otlp_metrics.buffer: too many exemplars")
    exemplars = []
    for exemplar in point.exemplars:
        which = exemplar.WhichOneof("value")
        if which is None:
            raise _PointDropped("otlp_metrics.exemplar: no value")
        exemplars.append(
            CheckedExemplar(
                _attributes(exemplar.filtered_attributes, "exemplar"),
                getattr(exemplar, which),
                exemplar.time_unix_nano,
                _id(exemplar.span_id, 8, "span_id"),
                _id(exemplar.trace_id, 16, "trace_id"),
            )
        )
    return exemplars


def _id(raw: bytes, size: int, what: str) -> int | None:
    if not raw:
        return None
    if len(raw) != size:
        raise _PointDropped(f"otlp_metrics.exemplar.{what}: not {size} bytes")
    return int.from_bytes(raw, "big")


def _attributes(pairs: Any, where: str) -> Attributes:
    """OTLP key-values as decoded attributes (a later key replaces an earlier one)."""
    if len(pairs) > MAX_ATTRIBUTES:
        raise InvalidRecord(f"otlp_metrics.buffer: too many {where} attributes")
    budget = [MAX_VALUES]
    return {pair.key: _value(pair.value, 0, budget, where) for pair in pairs}


def _value(value: Any, depth: int, budget: list[int], where: str) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        raise _PointDropped(f"otlp_metrics.{where}.attributes: a value with nothing set")
    if which == "array_value" or which == "kvlist_value":
        items = value.array_value.values if which == "array_value" else value.kvlist_value.values
        budget[0] -= len(items)
        if depth >= MAX_DEPTH or budget[0] < 0:
            raise InvalidRecord(f"otlp_metrics.buffer: {where} attribute values too large")
        if which == "array_value":
            return [_value(item, depth + 1, budget, where) for item in items]
        return {pair.key: _value(pair.value, depth + 1, budget, where) for pair in items}
    return getattr(value, which)
