# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Metrics on a real kernel: nothing is collected while nobody listens; once a reader
listens, every instrument's points come back through TraceReader and the rebuild exactly
as the SDK's own OTLP encoding of the same collection, in both temporalities."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys

import pytest
from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData
from opentelemetry.sdk.metrics.view import (
    ExplicitBucketHistogramAggregation,
    ExponentialBucketHistogramAggregation,
    View,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from opentelemetry_exporter_userevents import UserEventsMetricExporter, UserEventsMetricReader
from opentelemetry_exporter_userevents.reader import TraceReader
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json
from opentelemetry_exporter_userevents.record import flags
from tests.support.kernel_support import in_child, wait_until
from tests.support.otlp import metric_points

pytestmark = pytest.mark.kernel


class CapturingExporter(UserEventsMetricExporter):
    """The product exporter, keeping each MetricsData it was handed: the SDK's own
    collection, to compare the reader's rebuild with."""

    def __init__(self, **options):
        super().__init__(**options)
        self.captured: list[MetricsData] = []

    def export(self, metrics_data, timeout_millis=10_000, **kwargs) -> MetricExportResult:
        self.captured.append(metrics_data)
        return super().export(metrics_data, timeout_millis, **kwargs)


def _read_points(reader: TraceReader, join_stage: JoinStage, count: int) -> list[MetricPoint]:
    points: list[MetricPoint] = []

    def more() -> bool:
        points.extend(p for p in join_stage.add(reader.read()) if isinstance(p, MetricPoint))
        return len(points) >= count

    assert wait_until(more, timeout=60), f"{len(points)} of {count} points arrived"
    return points


def _by_collection(points: list[MetricPoint]) -> list[list[MetricPoint]]:
    """Points grouped by collection (the SDK stamps one time on a whole collection)."""
    groups: dict[int, list[MetricPoint]] = {}
    for point in points:
        groups.setdefault(point.point.time_unix_nano, []).append(point)
    return list(groups.values())


def _instruments(meter, calls: list[str]) -> None:
    """Every instrument kind, with ints, doubles, -0.0, huge doubles, attributes of every
    OTLP type and exemplars (measurements inside a sampled span)."""

    def observe(name: str, observations: list[Observation]):
        def callback(options: CallbackOptions):
            calls.append(name)
            return observations

        return callback

    meter.create_observable_counter(
        "obs.counter", [observe("counter", [Observation(7, {"k": "a"}), Observation(9)])]
    )
    meter.create_observable_up_down_counter(
        "obs.updown", [observe("updown", [Observation(-2.5, {"k": True})])]
    )
    meter.create_observable_gauge(
        "obs.gauge",
        [observe("gauge", [Observation(-0.0, {"g": 1}), Observation(1e308, {"g": 2})])],
        unit="By",
        description="observed",
    )
    counter = meter.create_counter("requests", unit="{request}", description="requests served")
    float_counter = meter.create_counter("seconds", unit="s")
    updown = meter.create_up_down_counter("queue")
    histogram = meter.create_histogram("latency", unit="ms")
    exponential = meter.create_histogram("latency.exp", unit="ms")
    gauge = meter.create_gauge("temperature")
    context = trace.set_span_in_context(
        NonRecordingSpan(SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED)))
    )
    attributes = {"s": "x", "i": -(2**63), "f": 0.1, "b": False, "l": ("a", "b")}
    counter.add(5, attributes, context=context)
    counter.add(2**62, {"big": True})
    float_counter.add(0.1)
    float_counter.add(0.2)
    updown.add(-3, {"q": "in"})
    updown.add(1)
    for value in (0.0, 0.5, 7.25, 99.0, 1e6, 3):
        histogram.record(value, {"route": "/a"}, context=context)
        exponential.record(value, {"route": "/a"})
    exponential.record(1e-300)
    gauge.set(21.5, {"room": "a"})
    gauge.set(-4)


def _views() -> list[View]:
    return [
        View(instrument_name="latency.exp", aggregation=ExponentialBucketHistogramAggregation()),
        View(
            instrument_name="latency",
            aggregation=ExplicitBucketHistogramAggregation((0.0, 1.0, 10.0, 1000.0)),
        ),
    ]


@pytest.mark.parametrize("temporality", ["cumulative", "delta"])
def test_every_instrument_comes_back_as_the_sdks_own_otlp_encoding(
    tracefs, prefix, temporality, monkeypatch
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", temporality)
    exporter = CapturingExporter(prefix=prefix)
    metric_reader = UserEventsMetricReader(exporter, export_interval_millis=math.inf)
    provider = MeterProvider(
        metric_readers=[metric_reader],
        resource=Resource({"service.name": "metrics", "pid": 1}),
        views=_views(),
    )
    calls: list[str] = []
    _instruments(provider.get_meter("app.meter", "1.2", attributes={"m": 1}), calls)
    try:
        metric_reader.force_flush()  # nobody listens: nothing is collected, no callback runs
        assert metric_reader.skipped == 1 and calls == [] and exporter.captured == []

        with TraceReader(tracefs, prefix, rescan_interval=0.1) as reader:
            assert wait_until(lambda: exporter.listened, timeout=10)
            metric_reader.force_flush()
            _instruments_again(provider)
            metric_reader.force_flush()
            expected = [otlp_json.metrics_data_request(d) for d in exporter.captured]
            total = sum(_count(d) for d in exporter.captured)
            points = _read_points(reader, JoinStage(), total)
            assert reader.lost == 0 and reader.decoder.stats.undecodable == 0
    finally:
        provider.shutdown()

    assert len(exporter.captured) == 2 and sorted(set(calls)) == ["counter", "gauge", "updown"]
    assert exporter.stats.written == total + 1  # and one resource announcement
    got = [otlp_json.metrics_request(group) for group in _by_collection(points)]
    assert got == expected
    temporalities = {p.temporality.name for p in points if p.temporality is not None}
    assert temporalities == ({"CUMULATIVE", "DELTA"} if temporality == "delta" else {"CUMULATIVE"})


def _instruments_again(provider: MeterProvider) -> None:
    """Measurements between two collections: deltas and cumulative sums differ."""
    meter = provider.get_meter("app.meter", "1.2", attributes={"m": 1})
    meter.create_counter("requests", unit="{request}", description="requests served").add(3)
    meter.create_histogram("latency", unit="ms").record(5000.0, {"route": "/a"})


def _count(data: MetricsData) -> int:
    return sum(
        len(metric.data.data_points)
        for resource_metrics in data.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
    )


def test_oversized_histograms_arrive_merged_with_their_counts_and_marks(tracefs, prefix):
    exporter = CapturingExporter(prefix=prefix)
    metric_reader = UserEventsMetricReader(exporter, export_interval_millis=math.inf)
    bounds = tuple(float(i) for i in range(3000))
    provider = MeterProvider(
        metric_readers=[metric_reader],
        views=[
            View(instrument_name="wide", aggregation=ExplicitBucketHistogramAggregation(bounds))
        ],
    )
    meter = provider.get_meter("wide")
    histogram = meter.create_histogram("wide")
    many = {f"attribute.{i}": "v" * 50 for i in range(200)}
    try:
        with TraceReader(tracefs, prefix, rescan_interval=0.1) as reader:
            assert wait_until(lambda: exporter.listened, timeout=10)
            for i in range(3000):
                histogram.record(i + 0.5, many)
            meter.create_counter("attributes").add(1, many)
            metric_reader.force_flush()
            points = _read_points(reader, JoinStage(), 2)
    finally:
        provider.shutdown()

    by_name = {p.name: p for p in points}
    wide, counter = by_name["wide"], by_name["attributes"]
    assert wide.truncated & flags.TRUNCATED_BUCKETS and wide.truncated & flags.TRUNCATED_ATTRIBUTES
    assert wide.point.count == 3000 == sum(wide.point.bucket_counts)
    assert len(wide.point.bucket_counts) == len(wide.point.explicit_bounds) + 1
    assert set(wide.point.explicit_bounds) <= set(bounds)
    assert wide.point.sum == sum(i + 0.5 for i in range(3000))
    assert wide.dropped_attributes + len(wide.point.attributes) == 200
    assert counter.truncated & flags.TRUNCATED_ATTRIBUTES and counter.point.value == 1
    assert counter.dropped_attributes + len(counter.point.attributes) == 200
    assert exporter.stats.truncated == 2


def test_a_listener_arriving_later_sees_the_next_cycle(tracefs, prefix):
    """The reader's own thread: cycles skip while nobody listens and run once one does."""
    exporter = CapturingExporter(prefix=prefix)
    metric_reader = UserEventsMetricReader(exporter, export_interval_millis=50)
    provider = MeterProvider(metric_readers=[metric_reader])
    provider.get_meter("m").create_counter("ticks").add(1)
    try:
        assert wait_until(lambda: metric_reader.skipped >= 3, timeout=10)
        assert exporter.captured == []
        with TraceReader(tracefs, prefix, rescan_interval=0.1) as reader:
            points = _read_points(reader, JoinStage(), 1)
        assert points[0].name == "ticks" and points[0].point.value == 1
        skipped = metric_reader.skipped
        assert wait_until(lambda: metric_reader.skipped > skipped, timeout=10)
    finally:
        provider.shutdown()


def _app_metrics(prefix: str) -> list[dict]:
    """A process that collects whenever a reader listens: every instrument once, then the
    OTLP/JSON of what its SDK handed the exporter."""
    exporter = CapturingExporter(prefix=prefix)
    metric_reader = UserEventsMetricReader(exporter, export_interval_millis=math.inf)
    provider = MeterProvider(
        metric_readers=[metric_reader], resource=Resource({"service.name": "cli"}), views=_views()
    )
    _instruments(provider.get_meter("cli.meter"), [])
    # the reader enables one tracepoint after another: wait for every kind's
    registrations = exporter.registrations.values()
    assert wait_until(lambda: all(r is not None and r.enabled for r in registrations), 60)
    metric_reader.force_flush()
    provider.shutdown()
    return [otlp_json.metrics_data_request(d) for d in exporter.captured]


def _cli_record(prefix: str, tmp_path, *args: str) -> subprocess.Popen:
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "--prefix",
         prefix, "record", "--ready-file", str(ready), "--rescan-interval", "0.1", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert wait_until(lambda: ready.exists() and ready.read_text(), 60), process.stderr
    return process


@pytest.mark.parametrize("output_format", ["otlp-json", "tree"])
def test_the_cli_records_metrics_as_otlp_json_requests_or_a_tree(
    tracefs, prefix, tmp_path, output_format
):
    output = tmp_path / "out"
    recorder = _cli_record(prefix, tmp_path, "--format", output_format, "--output", str(output))
    (expected,) = in_child(lambda: _app_metrics(prefix), timeout=120)
    points = sum(
        len(next(v for v in m.values() if isinstance(v, dict))["dataPoints"])
        for rm in expected["resourceMetrics"]
        for sm in rm["scopeMetrics"]
        for m in sm["metrics"]
    )
    if output_format == "otlp-json":
        assert wait_until(lambda: output.exists() and output.read_text().endswith("\n"), 30)
    else:
        assert wait_until(lambda: output.exists() and output.read_text().count("\n") >= points, 30)
    recorder.send_signal(signal.SIGINT)
    _, err = recorder.communicate(timeout=60)
    assert recorder.returncode == 0, err
    assert f"{points} metric points rebuilt" in err and "lost 0" in err

    if output_format == "otlp-json":
        requests = [json.loads(line) for line in output.read_text().splitlines()]
        assert requests and all("resourceMetrics" in r for r in requests)
        assert metric_points(requests) == metric_points([expected])  # one request per read
        return
    shown = output.read_text()
    assert "requests{s=x i=-9223372036854775808 f=0.1 b=False (+1)}  sum (cumulative" in shown
    assert "latency{route=/a}  histogram (cumulative)  count=6" in shown
    assert "cli" in shown and "obs.gauge{g=2}  gauge  1e+308  By" in shown
