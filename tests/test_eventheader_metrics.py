# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``format="eventheader"`` for metrics: the metric exporter registers ``otlp_metrics`` with
the Rust and .NET exporters' fields and writes one OTLP request per data point, which the
reader's ``otlp_metrics`` decoder rebuilds point by point as the SDK made it; the default
format's guarantees hold (the enable bit first, counted drops, never raising), and without
opentelemetry-proto the exporter says so once and writes the default format."""

from __future__ import annotations

import logging
import math
import sys
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents import UserEventsMetricExporter, UserEventsMetricReader
from opentelemetry_exporter_userevents import metric_exporter as metric_exporter_module
from opentelemetry_exporter_userevents._export import otlp_metrics_encoder as enc
from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.reader.decode import otlp_metrics as reader_otlp_metrics
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder, TraceRecord
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import metrics_data
from opentelemetry_exporter_userevents.record.otlp_metrics import MAX_BUFFER
from tests.support.fake_kernel import FakeKernel
from tests.support.otlp_metrics_captures import RESOURCE, SCOPE, otlp_metrics_format, sample_metrics
from tests.support.pages import data_event, page, record

EVENT_ID = 421
CUMULATIVE = AggregationTemporality.CUMULATIVE
NAME = "otlp_metrics"


def rebuilt(payloads: list[bytes]) -> tuple[list[Any], JoinStage]:
    """What the reader makes of these records: the decoder, then the join's rebuild."""
    decoder = RecordDecoder("nosuch", providers=["*"])
    decoder.add(parse_format(otlp_metrics_format(EVENT_ID)))
    records: list[TraceRecord] = []
    for n, raw in enumerate(payloads):
        event = data_event(0, record(EVENT_ID, raw))
        decoder.decode_page(page(1000 + n, [event], size=len(event) + 64), records)
    assert decoder.stats.undecodable == 0
    join_stage = JoinStage(resource_wait=float("inf"))
    return join_stage.add(records) + join_stage.flush(), join_stage


def one_point_each(data: MetricsData) -> list[MetricsData]:
    """The SDK's data split as the Rust exporter splits it: one point a request."""
    return [
        MetricsData([ResourceMetrics(rm.resource, [ScopeMetrics(sm.scope, [
            Metric(m.name, m.description, m.unit, replace(m.data, data_points=[point]))
        ], sm.schema_url)], rm.schema_url)])
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        for point in m.data.data_points
    ]  # fmt: skip


def sdk_metrics() -> MetricsData:
    """What an app's SDK hands an exporter: every instrument kind, int and float values,
    an exponential histogram by a view, attributes of each kind."""
    reader = InMemoryMetricReader()
    view = View(instrument_name="wait", aggregation=ExponentialBucketHistogramAggregation())
    provider = MeterProvider(metric_readers=[reader], views=[view],
                             resource=Resource({"service.name": "shop", "n": 3}))  # fmt: skip
    meter = provider.get_meter("shop.meter", "2.0", attributes={"team": "x"})
    meter.create_counter("orders", "{order}", "placed").add(3, {"route": "/a", "ok": True})
    meter.create_counter("orders", "{order}", "placed").add(2, {"route": "/b"})
    meter.create_up_down_counter("queue").add(-4.5, {"list": ["a", "b"]})
    meter.create_histogram("latency", "ms").record(7.25, {"n": 2})
    meter.create_histogram("wait", "s").record(0.5)
    meter.create_gauge("temperature").set(21)
    meter.create_observable_gauge("load", [lambda options: [_observation(0.75)]])
    data = reader.get_metrics_data()
    provider.shutdown()
    assert data is not None
    return data


def _observation(value: float) -> Any:
    from opentelemetry.metrics import Observation  # noqa: PLC0415

    return Observation(value, {"cpu": 0})


def exported(monkeypatch, tmp_path, data: MetricsData, **options: Any):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsMetricExporter(tracefs=fake.tracefs, format="eventheader", **options)
    assert exporter.export(data).name == "SUCCESS"
    fake.settle(exporter)
    return exporter, fake.records(NAME), fake


def test_the_exporter_registers_the_producers_otlp_metrics_tracepoint(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsMetricExporter(tracefs=fake.tracefs, format="eventheader")
    (command,) = fake.commands  # no resource tracepoint, no per-kind ones
    theirs = reader_otlp_metrics.COMMAND  # what a reader, or a Rust app, registered first
    assert [f.strip() for f in command.split(";")] == [f.strip() for f in theirs.split(";")]
    assert set(exporter.registrations) == {NAME}
    assert exporter.listened
    fake.settle(exporter)


def test_each_point_is_one_request_the_reader_rebuilds_as_the_sdk_made_it(monkeypatch, tmp_path):
    data = sdk_metrics()
    exporter, payloads, _ = exported(monkeypatch, tmp_path, data)
    singles = one_point_each(data)
    assert len(payloads) == len(singles) == 7 and exporter.stats.written == 7
    for payload, single in zip(payloads, singles, strict=True):
        points, join_stage = rebuilt([payload])
        assert join_stage.stats.invalid == 0 and join_stage.stats.metric_points == 1
        assert encode_metrics(metrics_data(points)) == encode_metrics(single)


def test_the_request_is_the_sdk_encoders_with_exemplars_and_every_kind(monkeypatch, tmp_path):
    """The sample points (an exemplar with ids, a list attribute, both histograms) come out
    as the SDK's own OTLP encoder writes each alone."""
    data = MetricsData([ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, sample_metrics(), "")],
                                        "")])  # fmt: skip
    exporter, payloads, _ = exported(monkeypatch, tmp_path, data)
    assert exporter.stats.written == 4
    for payload, single in zip(payloads, one_point_each(data), strict=True):
        assert payload[:12] == b"\0\0\0\0v0.19.00"
        assert int.from_bytes(payload[12:16], "little") == (len(payload) - 16) << 16
        assert ExportMetricsServiceRequest.FromString(payload[16:]) == encode_metrics(single)
        points, join_stage = rebuilt([payload])
        assert encode_metrics(metrics_data(points)) == encode_metrics(single)


def _big(attribute_bytes: int) -> MetricsData:
    point = NumberDataPoint({"blob": "x" * attribute_bytes}, 1, 2, 1)
    metric = Metric("big", "", "", Sum([point], CUMULATIVE, True))
    return MetricsData([ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, [metric], "")], "")])


def test_a_request_over_the_limit_is_dropped_and_counted_in_dropped_invalid(
    monkeypatch, tmp_path, caplog
):
    exporter, payloads, _ = exported(monkeypatch, tmp_path, _big(4064))
    assert payloads == [] and exporter.stats.dropped_invalid == 1
    assert "over its 4048-byte limit" in caplog.text
    exporter, payloads, _ = exported(monkeypatch, tmp_path, _big(3800))
    assert len(payloads) == 1 and len(payloads[0]) <= 4064 and exporter.stats.written == 1


def test_the_rust_exporters_limit_holds_past_a_larger_record_size(monkeypatch, tmp_path):
    """max_record_size at its largest (perf's 8184) is below Rust's 65,360: the smaller
    limit is the record's."""
    exporter, payloads, _ = exported(monkeypatch, tmp_path, _big(7900), max_record_size=8184)
    assert len(payloads) == 1 and len(payloads[0]) <= 8184
    assert MAX_BUFFER == 65360


def test_nothing_is_encoded_while_nobody_listens(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsMetricExporter(tracefs=fake.tracefs, format="eventheader")
    registration = exporter.registrations[NAME]
    assert registration is not None
    registration.enable_word[0] = 0
    assert not exporter.listened

    def must_not_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("encoded while nobody listened")

    monkeypatch.setattr(exporter, "_encode", must_not_run)
    exporter.export(sdk_metrics())
    fake.settle(exporter)
    assert exporter.stats.not_listened == 7 and exporter.stats.written == 0
    reader = UserEventsMetricReader(exporter, export_interval_millis=math.inf)
    reader.force_flush()
    assert reader.skipped == 1  # the reader collects nothing either


class _Odd:
    """An attribute value no encoding has."""


def test_a_point_that_cannot_be_encoded_is_counted_never_raised(monkeypatch, tmp_path, caplog):
    good = NumberDataPoint({"k": "v"}, 1, 2, 5)
    odd = NumberDataPoint({"k": _Odd()}, 1, 2, 5)
    beyond = NumberDataPoint({}, 1, 2, 10**400)  # no double holds it
    metric = Metric("m", "", "", Sum([odd, good, beyond], CUMULATIVE, True))
    data = MetricsData([ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, [metric], "")], "")])
    with caplog.at_level(logging.WARNING):
        exporter, payloads, _ = exported(monkeypatch, tmp_path, data)
    assert exporter.stats.dropped_invalid == 2 and exporter.stats.written == 1
    (point,), _ = rebuilt(payloads)
    assert dict(point.point.attributes) == {"k": "v"}
    assert "a metric data point dropped (counted in dropped_invalid)" in caplog.text


def test_big_integers_and_unpaired_surrogates_are_kept_readable(monkeypatch, tmp_path):
    point = NumberDataPoint({"t": "a\udc80b", "n": -(2**70)}, 1, 2, 2**64)
    metric = Metric("m\ud800", "", "", Sum([point], CUMULATIVE, True))
    data = MetricsData([ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, [metric], "")], "")])
    exporter, payloads, _ = exported(monkeypatch, tmp_path, data)
    assert exporter.stats.written == 1
    (rebuilt_point,), _ = rebuilt(payloads)
    assert rebuilt_point.name == "m\ufffd"
    assert dict(rebuilt_point.point.attributes) == {"t": "a\ufffdb", "n": str(-(2**70))}
    assert rebuilt_point.point.value == float(2**64)


def test_redact_sees_the_resource_and_the_points(monkeypatch, tmp_path):
    def redact(key: str, value: Any) -> Any:
        if key == "service.instance.id":
            return None
        return "[redacted]" if key == "store" else value

    data = MetricsData([ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, sample_metrics(), "")],
                                        "")])  # fmt: skip
    _, payloads, _ = exported(monkeypatch, tmp_path, data, redact=redact)
    points, _ = rebuilt(payloads)
    assert all(dict(p.resource.attributes) == {"service.name": "inventory"} for p in points)
    sold = next(p for p in points if p.name == "items.sold")
    assert dict(sold.point.attributes) == {"store": "[redacted]", "open": True}


def test_without_opentelemetry_proto_a_warning_once_and_the_default_format(
    monkeypatch, tmp_path, caplog
):
    request_module = "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2"
    monkeypatch.setitem(sys.modules, request_module, None)  # as if not installed
    monkeypatch.setattr(metric_exporter_module, "_warned_no_protobuf", False)
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_PREFIX", "inventory")
    fake = FakeKernel(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING):
        first = UserEventsMetricExporter(tracefs=fake.tracefs, format="eventheader")
        second = UserEventsMetricExporter(tracefs=fake.tracefs, format="eventheader")
    warnings = [r.getMessage() for r in caplog.records if "opentelemetry-proto" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "pip install 'opentelemetry-exporter-userevents[eventheader]'" in warnings[0]
    assert first.config.format == "default" and first.config.prefix == "inventory"
    assert any(c.startswith("inventory_metric_sum") for c in fake.commands)
    assert not any(c.startswith(NAME) for c in fake.commands)
    assert first.export(sdk_metrics()).name == "SUCCESS"
    fake.settle(first, second)
    assert first.stats.written == 7 + 1  # the points and their resource record


def test_without_opentelemetry_proto_a_provider_name_the_default_format_refuses_exports_nothing(
    monkeypatch, tmp_path, caplog
):
    """A provider name that is no C identifier cannot name the default format's
    tracepoints: refused as any prefix the format does not allow (never under ``otel``)."""
    request_module = "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2"
    monkeypatch.setitem(sys.modules, request_module, None)  # as if not installed
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_PREFIX", "9lives")  # a provider, no C name
    fake = FakeKernel(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING):
        exporter = UserEventsMetricExporter(tracefs=fake.tracefs, format="eventheader")
    assert "prefix '9lives' is not a C identifier" in caplog.text
    assert exporter.export(sdk_metrics()).name == "SUCCESS"
    fake.settle(exporter)
    assert fake.commands == [] and exporter.stats.written == 0


def test_an_unknown_format_is_said_and_the_default_written(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_FORMAT", "protobuf")
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsMetricExporter(tracefs=fake.tracefs)
    assert "format 'protobuf' is none of default, eventheader" in caplog.text
    assert exporter.config.format == "default" and "otlp_metrics" not in exporter.registrations
    fake.settle(exporter)


def test_the_option_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_FORMAT", "EventHeader")
    data = MetricsData([ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, sample_metrics(), "")],
                                        "")])  # fmt: skip
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsMetricExporter(tracefs=fake.tracefs)
    exporter.export(data)
    fake.settle(exporter)
    assert len(fake.records(NAME)) == 4 == exporter.stats.written


@pytest.mark.parametrize("size", [1024, 2048])
def test_the_limit_follows_max_record_size(monkeypatch, tmp_path, size):
    exporter, payloads, _ = exported(monkeypatch, tmp_path, _big(size), max_record_size=size)
    assert payloads == [] and exporter.stats.dropped_invalid == 1


def test_the_resource_and_scope_caches_stay_within_their_bounds(monkeypatch, tmp_path):
    """A resource or scope per point (an app that makes them anew): each point is still
    encoded with its own, and the caches never hold more than their bounds."""
    encoder = enc.OtlpMetricsEncoder(enc.load_protobuf(), None)
    sizes = []
    for n in range(enc.MAX_SCOPES_KEPT * 2 + 3):
        point = NumberDataPoint({}, 1, 2, n)
        metric = Metric("m", "", "", Sum([point], CUMULATIVE, True))
        scope = InstrumentationScope(f"scope{n}")
        scope_metrics = ScopeMetrics(scope, [metric], "")
        data = MetricsData([ResourceMetrics(Resource({"n": n}), [scope_metrics], "")])
        (item,) = metric_exporter_module.data_points(data)
        payload, _ = encoder.encode(item, 0, 4064)
        request = ExportMetricsServiceRequest.FromString(payload[16:])
        (resource_metrics,) = request.resource_metrics
        assert resource_metrics.resource.attributes[0].value.int_value == n
        assert resource_metrics.scope_metrics[0].scope.name == f"scope{n}"
        sizes.append((len(encoder._resources), len(encoder._scopes)))
    assert max(r for r, _ in sizes) == enc.MAX_RESOURCES_KEPT
    assert max(s for _, s in sizes) == enc.MAX_SCOPES_KEPT
