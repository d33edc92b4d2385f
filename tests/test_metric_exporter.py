# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The metric exporter and reader on the host (no user_events here: the exporter is a
no-op that nobody listens to), and the read side from encoded records to OTLP/JSON, the
tree view and a re-exporting metrics exporter."""

from __future__ import annotations

import io
import math
import threading
from importlib.metadata import entry_points

import pytest
from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import (
    OTLPMetricExporterMixin,
)
from opentelemetry.metrics import Observation
from opentelemetry.sdk.metrics import Counter, Exemplar, MeterProvider
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
from opentelemetry_exporter_userevents._export.metric_encoder import encode_point
from opentelemetry_exporter_userevents.metric_exporter import data_points
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput, TreeOutput
from opentelemetry_exporter_userevents.record import anyvalue, tracepoints
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.resource_id import hash_resource
from opentelemetry_exporter_userevents.record.schema import (
    METRIC_HISTOGRAM,
    METRIC_NUMBER,
    RESOURCE,
)
from tests.support.fake_kernel import FakeKernel
from tests.test_metric_encoder import HEADER, format_of


@pytest.mark.parametrize("preference", ["cumulative", "delta", "lowmemory", "bogus", " Delta "])
def test_temporality_preference_is_read_as_the_otlp_exporters_read_it(monkeypatch, preference):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", preference)
    ours = UserEventsMetricExporter()._preferred_temporality
    theirs = OTLPMetricExporterMixin()._get_temporality(None)
    assert ours == theirs  # synchronous gauges: neither names them (the reader's default)


def test_histogram_aggregation_preference_and_arguments_win(monkeypatch):
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION",
        "base2_exponential_bucket_histogram",
    )
    exporter = UserEventsMetricExporter(
        preferred_temporality={Counter: AggregationTemporality.DELTA}
    )
    from opentelemetry.sdk.metrics import Histogram  # noqa: PLC0415

    assert isinstance(
        exporter._preferred_aggregation[Histogram], ExponentialBucketHistogramAggregation
    )
    assert exporter._preferred_temporality[Counter] is AggregationTemporality.DELTA


def test_the_metric_exporter_is_an_entry_point():
    (entry,) = entry_points(group="opentelemetry_metrics_exporter", name="user_events")
    assert entry.load() is UserEventsMetricExporter


def test_nobody_listening_means_no_collection_at_all():
    calls = []

    def callback(options):
        calls.append(1)
        return [Observation(1)]

    reader = UserEventsMetricReader(export_interval_millis=math.inf)
    provider = MeterProvider(metric_readers=[reader])
    provider.get_meter("m").create_observable_gauge("g", [callback])
    provider.get_meter("m").create_counter("c").add(1)
    assert not reader.exporter.listened
    assert reader.force_flush() is True
    provider.shutdown()
    assert calls == [] and reader.skipped >= 1
    assert reader.exporter.stats.snapshot() == dict.fromkeys(reader.exporter.stats.snapshot(), 0)


def _collection():
    memory = InMemoryMetricReader()
    provider = MeterProvider(
        metric_readers=[memory],
        resource=Resource({"service.name": "svc", "n": 1}),
        views=[
            View(instrument_name="exp", aggregation=ExponentialBucketHistogramAggregation()),
            View(instrument_name="*"),
        ],
    )
    meter = provider.get_meter("scope", "1", attributes={"a": "b"})
    meter.create_counter("c", "1", "count").add(3, {"k": "v"})
    meter.create_up_down_counter("u").add(-2.5)
    meter.create_histogram("h").record(12.5, {"k": 1})
    meter.create_histogram("exp").record(0.001)
    meter.create_gauge("g").set(-0.0)
    meter.create_observable_counter("oc", [lambda o: [Observation(2**40)]])
    meter.create_observable_up_down_counter("ou", [lambda o: [Observation(-7)]])
    meter.create_observable_gauge("og", [lambda o: [Observation(1e300, {"x": (1, 2)})]])
    return memory.get_metrics_data()


def _records(data) -> list[TraceRecord]:
    """The records the exporter would write for ``data``: a resource, then one per point."""
    records = []
    resource = data.resource_metrics[0].resource
    attributes = anyvalue.encode(dict(resource.attributes)).encode()
    rid = hash_resource(attributes, b"")
    payload = RESOURCE.pack((rid, 1000), (attributes, b""))
    values = RESOURCE.unpack(HEADER + payload, format_of(RESOURCE, "otel_resource.0"))
    records.append(TraceRecord(0, tracepoints.RESOURCE_KIND, "otel_resource", 1, values))
    kinds = {1: "metric_sum", 2: "metric_gauge", 3: "metric_histogram", 4: "metric_exp_histogram"}
    for item in data_points(data):
        schema = METRIC_NUMBER if item.kind in (mv.KIND_SUM, mv.KIND_GAUGE) else METRIC_HISTOGRAM
        payload, _ = encode_point(item, rid, 4064)
        values = schema.unpack(HEADER + payload, format_of(schema, "otel_metric.0"))
        records.append(TraceRecord(0, kinds[item.kind], "otel_" + kinds[item.kind], 1, values))
    return records


def test_records_rebuild_the_sdks_own_otlp_json():
    data = _collection()
    join_stage = JoinStage()
    points = join_stage.add(_records(data))
    assert join_stage.stats.metric_points == len(points) == 9
    assert otlp_json.metrics_request(points) == otlp_json.metrics_data_request(data)


def test_the_tree_view_shows_one_readable_line_per_point():
    out = io.StringIO()
    tree = TreeOutput(out)
    tree.write(JoinStage().add(_records(_collection())))
    tree.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 9
    assert any("c{k=v}  sum (cumulative, monotonic)  3  1" in line for line in lines)
    assert any("og{x=(1, 2)}  gauge  1e+300" in line for line in lines)
    assert any(" h{k=1}  histogram (cumulative)  count=1 sum=12.5" in line for line in lines)
    assert all("svc" in line for line in lines)


def test_points_re_export_through_a_metrics_exporter_entry_point():
    output = ExporterOutput("console")
    assert output.metrics is not None
    output.metrics.out = printed = io.StringIO()
    output.write(JoinStage().add(_records(_collection())))
    output.close()
    assert output.failed == 0
    assert '"name": "og"' in printed.getvalue()


KINDS = {"metric_sum": 1, "metric_gauge": 2, "metric_histogram": 3, "metric_exp_histogram": 4}


def test_each_kind_goes_to_its_tracepoint_only_while_listened(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsMetricExporter(tracefs=fake.tracefs, prefix="k")
    histograms = exporter.registrations["metric_histogram"]
    histograms.enable_word[0] = 0  # nobody listens to histograms
    data = _collection()
    assert exporter.export(data).name == "SUCCESS"
    assert exporter.export(None).name == "FAILURE"  # not MetricsData: refused, not raised
    fake.settle(exporter)

    kinds = [item.kind for item in data_points(data)]
    decoded = {
        kind: fake.decoded(schema, f"k_{kind}") for kind, schema in tracepoints.METRIC_KINDS.items()
    }
    # c, u, oc, ou; g, og; h and exp (the "*" view); exp (the exponential view)
    assert len(decoded["metric_sum"]) == kinds.count(mv.KIND_SUM) == 4
    assert len(decoded["metric_gauge"]) == kinds.count(mv.KIND_GAUGE) == 2
    assert decoded["metric_histogram"] == [] and kinds.count(mv.KIND_HISTOGRAM) == 2
    assert len(decoded["metric_exp_histogram"]) == kinds.count(mv.KIND_EXP_HISTOGRAM) == 1
    for kind, records in decoded.items():
        assert all(v["kind"] == KINDS[kind] for v in records)
    stats = exporter.stats.snapshot()
    assert stats["not_listened"] == 2
    assert stats["written"] == 4 + 2 + 1 + 1  # and the resource record


def test_redaction_reaches_point_and_exemplar_attributes(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsMetricExporter(
        tracefs=fake.tracefs,
        prefix="r",
        redact=lambda key, value: "<redacted>" if key == "k" else value,
    )
    exemplar = Exemplar({"k": "secret", "other": 1}, 2.5, 7, 1, 2)
    point = NumberDataPoint({"k": "secret", "n": 1}, 1, 2, 3, [exemplar])
    data = MetricsData(
        [ResourceMetrics(Resource({"k": "secret"}), [ScopeMetrics(InstrumentationScope("s"),
         [Metric("m", None, None, Sum([point], AggregationTemporality.DELTA, True))], "")], "")]
    )  # fmt: skip
    exporter.export(data)
    fake.settle(exporter)
    (values,) = fake.decoded(METRIC_NUMBER, "r_metric_sum")
    assert anyvalue.decode(values["attributes"]) == {"k": "<redacted>", "n": 1}
    (written,) = anyvalue.decode(values["exemplars"])
    assert written["attributes"] == {"k": "<redacted>", "other": 1}
    (resource,) = fake.decoded(RESOURCE, "r_resource")
    assert anyvalue.decode(resource["attributes"]) == {"k": "<redacted>"}


def test_the_readers_own_thread_collects_each_interval_and_once_more_at_shutdown(
    monkeypatch, tmp_path
):
    """The reader runs the SDK's reader without its thread (no private SDK names): its own
    thread collects while listened, skips while not, and collects once more at shutdown."""
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsMetricExporter(tracefs=fake.tracefs, prefix="tick")
    reader = UserEventsMetricReader(exporter, export_interval_millis=5)
    calls: list[int] = []
    twice = threading.Event()

    def callback(options):
        calls.append(1)
        if len(calls) == 2:
            twice.set()
        return [Observation(len(calls))]

    provider = MeterProvider(metric_readers=[reader])
    provider.get_meter("m").create_observable_gauge("g", [callback])
    assert twice.wait(60), "collected each interval while listened"
    for registration in exporter.registrations.values():
        registration.enable_word[0] = 0
    skipped = reader.skipped
    while reader.skipped < skipped + 2:  # the thread goes on, collecting nothing
        threading.Event().wait(0.005)
    before = len(calls)
    for registration in exporter.registrations.values():
        registration.enable_word[0] = 1
    provider.shutdown()
    assert not reader._thread.is_alive()
    assert len(calls) > before, "the last collection at shutdown"
    fake.settle()
    assert len(fake.records("tick_metric_gauge")) == len(calls)
