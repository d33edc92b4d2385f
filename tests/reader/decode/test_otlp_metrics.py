# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The ``otlp_metrics`` tracepoint's boundary: the OTLP request in a record's buffer comes
back as the same request, point by point; a .NET-style buffer (lengths padded to fixed
widths) too; anything else is dropped and counted by reason and writer pid, and every
bound holds against hostile buffers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
    Summary,
    SummaryDataPoint,
)

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.reader.decode import otlp_metrics_check as check
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder, TraceRecord
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import metrics_data
from tests.support.otlp_metrics_captures import (
    VERSION,
    otlp_metrics_format,
    otlp_metrics_record,
    sample_requests,
)
from tests.support.pages import data_event, page

EVENT_ID = 420


def _decoder() -> RecordDecoder:
    decoder = RecordDecoder("nosuch", providers=["*"])
    decoder.add(parse_format(otlp_metrics_format(EVENT_ID)))
    return decoder


def _records(raws: list[bytes]) -> list[TraceRecord]:
    records: list[TraceRecord] = []
    decoder = _decoder()
    for n, raw in enumerate(raws):
        decoder.decode_page(page(1000 + n, [data_event(0, raw)]), records)
    return records


def _rebuild(raws: list[bytes]) -> tuple[list, JoinStage]:
    join_stage = JoinStage(resource_wait=float("inf"))
    return join_stage.add(_records(raws)) + join_stage.flush(), join_stage


def test_each_request_comes_back_as_the_same_request_point_by_point():
    for buffer in sample_requests():
        points, join_stage = _rebuild([otlp_metrics_record(EVENT_ID, buffer)])
        assert encode_metrics(metrics_data(points)) == ExportMetricsServiceRequest.FromString(
            buffer
        )
        assert join_stage.stats.metric_points == 1 and join_stage.stats.invalid == 0
        assert join_stage.stats.without_resource == 0  # the resource came beside the point
        assert join_stage.stats.services == {"inventory": 1}


def _varint(value: int, width: int = 0) -> bytes:
    """A protobuf varint, padded to ``width`` bytes as the .NET serializer pads lengths."""
    out = bytearray()
    while True:
        out.append(value & 0x7F)
        value >>= 7
        if not value and len(out) >= width:
            break
        out[-1] |= 0x80
    return bytes(out)


def _ld(field: int, body: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(body), 3) + body


def test_a_dotnet_style_buffer_with_padded_lengths_and_fixed64_values_decodes():
    """The .NET Geneva serializer leaves room for each length and pads it (non-minimal
    varints), and writes ``as_int`` and the times as fixed64."""
    key_value = _ld(1, b"host") + _ld(2, _ld(1, b"h1"))  # KeyValue{key, value{string}}
    point = (b"\x31" + struct.pack("<q", 7)  # as_int, field 6, fixed64
             + b"\x11" + struct.pack("<Q", 100) + b"\x19" + struct.pack("<Q", 200)
             + _ld(7, key_value))  # fmt: skip
    sum_ = b"\x18\x01" + b"\x10\x02" + _ld(1, point)  # is_monotonic, cumulative, points
    metric = _ld(1, b"requests") + _ld(3, b"1") + _ld(7, sum_)
    scope = _ld(1, _ld(1, b"Orders.Meter")) + _ld(2, metric)
    resource = _ld(1, _ld(1, _ld(1, b"service.name") + _ld(2, _ld(1, b"orders"))))
    buffer = _ld(1, resource + _ld(2, scope))
    (point_out,), join_stage = _rebuild([otlp_metrics_record(EVENT_ID, buffer)])
    assert join_stage.stats.invalid == 0
    assert point_out.name == "requests" and point_out.unit == "1" and point_out.monotonic
    assert point_out.point.value == 7 and type(point_out.point.value) is int
    assert (point_out.point.start_time_unix_nano, point_out.point.time_unix_nano) == (100, 200)
    assert dict(point_out.point.attributes) == {"host": "h1"}
    assert point_out.resource.attributes["service.name"] == "orders"
    assert point_out.scope.name == "Orders.Meter"


def _counted(raws: list[bytes]) -> JoinStage:
    points, join_stage = _rebuild(raws)
    assert points == []
    return join_stage


def test_an_unknown_protocol_or_version_or_a_bad_buffer_is_counted_by_reason_and_pid():
    good = sample_requests()[0]
    join_stage = _counted([
        otlp_metrics_record(EVENT_ID, good, pid=11, protocol=1),
        otlp_metrics_record(EVENT_ID, good, pid=11, version=b"v9.99.99"),
        otlp_metrics_record(EVENT_ID, b"\xff\xff\xff", pid=12),
        otlp_metrics_record(EVENT_ID, good[:-3], pid=12),
    ])  # fmt: skip
    assert join_stage.stats.invalid_reasons == {
        "otlp_metrics.protocol: not 0 (protobuf)": 1,
        "otlp_metrics.version: not a known version": 1,
        "otlp_metrics.buffer: not an ExportMetricsServiceRequest": 2,
    }
    assert join_stage.stats.invalid_pids == {11: 2, 12: 2}


def _request(*metrics: Metric, attributes=()) -> bytes:
    scope = ScopeMetrics(metrics=list(metrics))
    resource = ResourceMetrics(scope_metrics=[scope])
    resource.resource.attributes.extend(attributes)
    return ExportMetricsServiceRequest(resource_metrics=[resource]).SerializeToString()


def _sum_metric(name: str, points: int = 1, value: AnyValue | None = None) -> Metric:
    point = NumberDataPoint(as_int=1, time_unix_nano=5)
    if value is not None:
        point.attributes.append(KeyValue(key="k", value=value))
    return Metric(name=name, sum=Sum(data_points=[point] * points, aggregation_temporality=1))


def test_a_point_the_sdk_cannot_hold_is_dropped_alone_and_counted():
    summary = Metric(name="s", summary=Summary(data_points=[SummaryDataPoint(count=1)]))
    no_value = Metric(name="n", gauge={"data_points": [NumberDataPoint(time_unix_nano=1)]})
    empty = _sum_metric("e", value=AnyValue())
    buffer = _request(summary, no_value, empty, _sum_metric("kept"))
    points, join_stage = _rebuild([otlp_metrics_record(EVENT_ID, buffer, pid=21)])
    assert [p.name for p in points] == ["kept"]
    assert join_stage.stats.invalid_reasons == {
        "otlp_metrics.metric: a summary (the SDK has none)": 1,
        "otlp_metrics.point: no value": 1,
        "otlp_metrics.point.attributes: a value with nothing set": 1,
    }
    assert join_stage.stats.invalid_pids == {21: 3}


def _nested(depth: int) -> AnyValue:
    value = AnyValue(int_value=1)
    for _ in range(depth):
        value = AnyValue(array_value={"values": [value]})
    return value


@pytest.mark.parametrize(
    ("buffer", "reason"),
    [
        (_request(_sum_metric("p", points=check.MAX_POINTS + 1)), "too many points"),
        (_request(*[_sum_metric("m")] * (check.MAX_METRICS + 1)), "too many metrics"),
        (_request(_sum_metric("d", value=_nested(check.MAX_DEPTH + 1))),
         "point attribute values too large"),
        (_request(_sum_metric("v", value=AnyValue(array_value={"values": [AnyValue(
            int_value=1)] * (check.MAX_VALUES + 1)}))), "point attribute values too large"),
        (_request(_sum_metric("a"), attributes=[KeyValue(key=str(n)) for n in range(
            check.MAX_ATTRIBUTES + 1)]), "too many resource attributes"),
    ],
)  # fmt: skip
def test_a_request_past_a_bound_is_dropped_whole_and_counted(buffer, reason):
    assert len(buffer) <= 0xFFFF  # each fits the buffer the kernel carries
    join_stage = _counted([otlp_metrics_record(EVENT_ID, buffer, pid=31)])
    assert join_stage.stats.invalid_reasons == {f"otlp_metrics.buffer: {reason}": 1}


def test_values_up_to_the_bounds_are_kept():
    buffer = _request(_sum_metric("d", value=_nested(check.MAX_DEPTH)))
    (point,), join_stage = _rebuild([otlp_metrics_record(EVENT_ID, buffer)])
    assert join_stage.stats.invalid == 0 and point.name == "d"


def test_a_buffer_outside_its_record_is_undecodable_not_raised():
    raw = bytearray(otlp_metrics_record(EVENT_ID, sample_requests()[0]))
    raw[20:24] = struct.pack("<I", 0xFFFF << 16)  # a size past the record's end
    decoder = _decoder()
    records: list[TraceRecord] = []
    decoder.decode_page(page(1, [data_event(0, bytes(raw))]), records)
    assert records == [] and decoder.stats.undecodable == 1


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_buffers_are_rebuilt_or_counted_never_raised(data):
    """Random bytes, or a real request with bytes flipped and cut: nothing raises, and
    every record is rebuilt or counted by a reason of the fixed vocabulary."""
    if data.draw(st.booleans()):
        buffer = data.draw(st.binary(max_size=400))
    else:
        raw = bytearray(data.draw(st.sampled_from(sample_requests())))
        for _ in range(data.draw(st.integers(1, 4))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        buffer = bytes(raw[: data.draw(st.integers(0, len(raw)))])
    points, join_stage = _rebuild([otlp_metrics_record(EVENT_ID, buffer)])
    stats = join_stage.stats
    assert stats.metric_points == len(points) and stats.without_resource == 0
    for reason in stats.invalid_reasons:
        assert reason.startswith("otlp_metrics"), reason
    encode_metrics(metrics_data(points))  # what is rebuilt, OTLP carries


def test_the_version_the_producers_write_is_known():
    assert VERSION in check.KNOWN_VERSIONS


def _deep(depth: int) -> bytes:
    """A request whose one point's attribute value is ``depth`` arrays deep, by hand."""
    value = _ld(1, b"leaf")  # AnyValue{string_value}
    for _ in range(depth):
        value = _ld(5, _ld(1, value))  # AnyValue{array_value{values: [value]}}
    point = b"\x31" + struct.pack("<q", 1) + _ld(7, _ld(1, b"k") + _ld(2, value))
    metric = _ld(1, b"deep") + _ld(7, _ld(1, point))
    return _ld(1, _ld(2, _ld(2, metric)))


def test_a_buffer_nested_past_the_parsers_limit_is_counted_not_raised():
    """Protobuf's parser refuses nesting past its recursion limit (100): an attribute
    value 300 arrays deep, made by hand (the encoder refuses to write one)."""
    (point,), _ = _rebuild([otlp_metrics_record(EVENT_ID, _deep(3))])  # the layout is right
    assert dict(point.point.attributes) == {"k": ((("leaf",),),)}
    buffer = _deep(300)
    assert len(buffer) <= 0xFFFF
    join_stage = _counted([otlp_metrics_record(EVENT_ID, buffer)])
    assert join_stage.stats.invalid_reasons == {
        "otlp_metrics.buffer: not an ExportMetricsServiceRequest": 1
    }
