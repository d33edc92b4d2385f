# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's own health (:mod:`...outputs.health_metrics`): the points made of known
counts (names, attributes, values), what the OTLP/HTTP senders count of each POST, the
interval sending through a local collector, a collector that never answers not keeping
``record`` from reading, the health file ``status --spool DIR`` shows."""

from __future__ import annotations

import io
import os
import stat
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # noqa: E402
    ExportMetricsServiceRequest,
)

from opentelemetry_exporter_userevents.reader.cli import parser  # noqa: E402
from opentelemetry_exporter_userevents.reader.commands import record as record_command  # noqa: E402
from opentelemetry_exporter_userevents.reader.commands.status import reader_health  # noqa: E402
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord  # noqa: E402
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs import health_metrics as hm  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import OutputStage  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.health_files import health_files  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from opentelemetry_exporter_userevents.record import metric_values as mv  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import Receiver, receiver  # noqa: E402, F401
from tests.reader.outputs.test_otlp_proto_direct import _joined, _log, _span  # noqa: E402
from tests.reader.views.test_process_view import (  # noqa: E402
    _FakeReader,
    _python_core,  # noqa: F401 - autouse: the fake reader takes the Python path
    app_records,
)


def _values(points: list[Any]) -> dict[tuple[str, frozenset[tuple[str, Any]]], Any]:
    return {(p.name, frozenset(p.point.attributes.items())): p for p in points}


def _known() -> hm.Health:
    return hm.Health(
        time_ns=2_000,
        start_time_ns=1_000,
        pid=42,
        read=100,
        lost=7,
        invalid={"span.attributes: not a JSON object": 3, "undecodable": 2},
        dropped=[("output", "queue full", "span", 5), ("spool", "full", "log", 4)],
        inflight={"span": 6, "log": 1},
        queue_batches=2,
        queue_bytes=4096,
        spooled={"span": 9},
        resent={"span": 8},
        spool_requests=1,
        spool_bytes=300,
        spool_items={"span": 1},
        exported={"span": 80, "log": 10},
        failed=[("span", "HTTP 400 Bad Request", 11)],
        durations={
            "span": {
                "": {"count": 2, "sum": 0.03, "min": 0.01, "max": 0.02,
                     "buckets": [0, 1, 1] + [0] * 12},
                "HTTP 400 Bad Request": {"count": 1, "sum": 0.2, "min": 0.2, "max": 0.2,
                                         "buckets": [0] * 6 + [1] + [0] * 8},
            }
        },
    )  # fmt: skip


SPAN_EXPORTER = {
    ("otel.component.type", "otlp_http_span_exporter"),
    ("otel.component.name", "otlp_http_span_exporter/0"),
}


def test_points_of_known_counts_have_their_names_attributes_and_values():
    points = hm.health_points(_known())
    by = _values(points)
    read = by[("otel_userevents.reader.records.read", frozenset())]
    assert read.point.value == 100 and read.kind == mv.KIND_SUM and read.monotonic
    assert (read.point.start_time_unix_nano, read.point.time_unix_nano) == (1_000, 2_000)
    assert read.temporality.name == "CUMULATIVE"
    assert by[("otel_userevents.reader.records.lost", frozenset())].point.value == 7
    reason = ("otel_userevents.reason", "span.attributes: not a JSON object")
    assert by[("otel_userevents.reader.records.invalid", frozenset({reason}))].point.value == 3
    undecodable = frozenset({("otel_userevents.reason", "undecodable")})
    assert by[("otel_userevents.reader.records.invalid", undecodable)].point.value == 2
    dropped = frozenset({("otel_userevents.stage", "output"),
                         ("otel_userevents.reason", "queue full"),
                         ("otel_userevents.signal", "span")})  # fmt: skip
    assert by[("otel_userevents.reader.items.dropped", dropped)].point.value == 5
    spooled = frozenset({("otel_userevents.signal", "span")})
    assert by[("otel_userevents.reader.items.spooled", spooled)].point.value == 9
    assert by[("otel_userevents.reader.items.resent", spooled)].point.value == 8
    queue = by[("otel_userevents.reader.queue.size", frozenset())]
    assert (queue.point.value, queue.unit, queue.monotonic) == (4096, "By", False)
    assert by[("otel_userevents.reader.spool.size", frozenset())].point.value == 300
    inflight = by[("otel.sdk.exporter.span.inflight", frozenset(SPAN_EXPORTER))]
    assert (inflight.point.value, inflight.unit, inflight.monotonic) == (6, "{span}", False)
    exported = by[("otel.sdk.exporter.span.exported", frozenset(SPAN_EXPORTER))]
    assert (exported.point.value, exported.monotonic) == (80, True)
    failed = frozenset(SPAN_EXPORTER | {("error.type", "HTTP 400 Bad Request")})
    assert by[("otel.sdk.exporter.span.exported", failed)].point.value == 11
    log_exported = [p for p in points if p.name == "otel.sdk.exporter.log.exported"]
    assert [p.point.value for p in log_exported] == [10]
    assert not [p for p in points if p.name == "otel.sdk.exporter.metric_data_point.exported"]
    duration = by[("otel.sdk.exporter.operation.duration", frozenset(SPAN_EXPORTER))]
    assert duration.kind == mv.KIND_HISTOGRAM and duration.unit == "s"
    assert (duration.point.count, duration.point.bucket_counts[:3]) == (2, (0, 1, 1))
    assert duration.point.explicit_bounds == hm.DURATION_BOUNDS
    assert by[("otel.sdk.exporter.operation.duration", failed)].point.max == 0.2
    resource = read.resource.attributes
    assert resource["service.name"] == "otel-userevents"
    assert resource["process.pid"] == os.getpid() and resource["host.name"]
    assert read.scope.name == "opentelemetry_exporter_userevents.reader"


def test_error_type_keeps_the_reason_without_what_varies():
    assert hm.error_type("HTTP 400 Bad Request: field x is wrong") == "HTTP 400 Bad Request"
    assert hm.error_type("HTTP 503 after 3 attempts") == "HTTP 503"
    assert hm.error_type("no answer (ConnectionRefusedError) after 5 attempts") == (
        "no answer (ConnectionRefusedError)"
    )
    assert hm.error_type("rejected by the collector: too old") == "rejected by the collector"


def test_gather_takes_the_counts_the_summary_shows():
    class Blocked:
        failed, sdk_objects = 0, False

        def write(self, items: Any) -> None:
            time.sleep(0.5)

        def close(self) -> None:
            pass

    stage = OutputStage(Blocked(), 0.1, max_batches=1, drop_oldest=False)
    items = _joined(_span())
    stage.write(items)  # taken by the thread, which sleeps in write
    deadline = time.monotonic() + 2
    while stage.queue.counts()[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    stage.write(items)  # queued
    stage.write(items + _joined(_log()))  # no room: dropped
    reader = SimpleNamespace(decoder=SimpleNamespace(stats=SimpleNamespace(
        records=12, undecodable=1)), lost=4)  # fmt: skip
    join_stage = SimpleNamespace(stats=SimpleNamespace(invalid_reasons={"bad": 2}))
    health = hm.gather(reader, join_stage, stage, 5)
    stage.close()
    assert (health.read, health.lost, health.start_time_ns) == (12, 4, 5)
    assert health.invalid == {"bad": 2, "undecodable": 1}
    assert health.inflight == {"span": 2}
    assert health.queue_batches == 1 and health.queue_bytes > 0
    assert sorted(health.dropped) == [
        ("output", "queue full", "log", 1),
        ("output", "queue full", "span", 1),
    ]


def test_the_senders_count_what_was_taken_failed_and_how_long(receiver: Receiver):  # noqa: F811
    receiver.statuses = [200, 400]
    output = ExporterOutput("otlp_proto_http")
    records: list[JoinedRecord] = _joined(_span(), _span(span_id=3))
    output.write(records)
    output.write(records)
    delivered = output.delivered()
    output.close()
    taken, failed, durations = delivered["spans"]
    assert taken == 2
    assert failed == Counter({"HTTP 400 Bad Request": 2})
    assert durations[""]["count"] == 1 and durations["HTTP 400 Bad Request"]["count"] == 1
    assert sum(durations[""]["buckets"]) == 1 and durations[""]["sum"] > 0


class _CountingReader(_FakeReader):
    def __init__(self, records: list[TraceRecord]) -> None:
        super().__init__(records)
        self.reads = 0
        self.lost = 3

    def read_cpu_pages(self) -> list[tuple[int, bytes]]:
        self.reads += 1
        return super().read_cpu_pages()

    def _decode_page(self, page: bytes, out: list[TraceRecord]) -> None:
        self.decoder.stats.records += len(self.records)
        super()._decode_page(page, out)


def _record(monkeypatch, flags: list[str], reader: _CountingReader) -> tuple[int, str, float]:
    args = parser().parse_args(["record", "--no-resource-detection", *flags])
    monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
    monkeypatch.setattr(record_command, "TraceReader", lambda *a, **k: reader)
    err = io.StringIO()
    started = time.monotonic()
    code = record_command.record(args, io.StringIO(), err)
    return code, err.getvalue(), time.monotonic() - started


def _metrics(body: bytes) -> dict[str, list[Any]]:
    request = ExportMetricsServiceRequest.FromString(body)
    found: dict[str, list[Any]] = {}
    for rm in request.resource_metrics:
        resource = {a.key: a.value for a in rm.resource.attributes}
        assert resource["service.name"].string_value == "otel-userevents"
        for sm in rm.scope_metrics:
            assert sm.scope.name == "opentelemetry_exporter_userevents.reader"
            for metric in sm.metrics:
                found.setdefault(metric.name, []).append(metric)
    return found


def test_record_sends_its_health_on_the_interval_and_at_stop(monkeypatch, receiver, tmp_path):  # noqa: F811
    records = app_records(5001)
    reader = _CountingReader(records)
    spool = tmp_path / "spool"
    code, err, _took = _record(
        monkeypatch,
        ["--exporter", "otlp_proto_http", "--duration", "0.6", "--health-interval", "0.2",
         "--spool", str(spool)],
        reader,
    )  # fmt: skip
    assert code == 0, err
    bodies = receiver.bodies("/v1/metrics")
    assert len(bodies) >= 3  # the interval's (0.2, 0.4 s...) and the one at stop
    last = _metrics(bodies[-1])
    read = last["otel_userevents.reader.records.read"][0].sum
    assert read.is_monotonic and read.data_points[0].as_int == len(records)
    assert last["otel_userevents.reader.records.lost"][0].sum.data_points[0].as_int == 3
    exported = {
        tuple((a.key, a.value.string_value) for a in p.attributes): p.as_int
        for p in last["otel.sdk.exporter.span.exported"][0].sum.data_points
    }
    assert "2 spans and 2 logs rebuilt" in err
    assert exported == {tuple(sorted(SPAN_EXPORTER, reverse=True)): 2}
    # the health requests before the last were taken too: counted as metric points exported
    points = last["otel.sdk.exporter.metric_data_point.exported"][0].sum.data_points
    assert points[0].as_int > 0
    assert "otel.sdk.exporter.operation.duration" in last
    # and the health file status reads: the reader's own, named after its spool namespace
    [name] = health_files(str(spool))
    assert stat.S_IMODE(os.stat(spool / name).st_mode) == 0o600
    health = hm.read_health_file(str(spool), name)
    assert health is not None and health.read == len(records) and health.lost == 3


def test_a_collector_that_never_answers_keeps_no_read_waiting(monkeypatch, collector):
    silent = collector(lambda connection, request: None, timeout=30)
    reader = _CountingReader(app_records(5001))
    code, err, took = _record(
        monkeypatch,
        ["--exporter", "otlp_proto_http", "--duration", "0.8", "--health-interval", "0.1",
         "--stop-timeout", "0.3"],
        reader,
    )  # fmt: skip
    assert code == 0
    assert silent.requests >= 1  # a request went out and hangs for 30 s
    assert took < 5
    assert reader.reads >= 5  # the loop went on reading (each 0.1 s) while the request hung
    assert "not delivered: stop timeout" in err


def test_the_option_says_its_default_and_takes_zero(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["record", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--health-interval SECONDS" in help_text
    assert "(seconds, 0 or more; default 60; 0: never)" in help_text
    assert parser().parse_args(["record"]).health_interval == 60.0
    assert parser().parse_args(["record", "--health-interval", "0"]).health_interval == 0.0
    with pytest.raises(SystemExit):
        parser().parse_args(["record", "--health-interval", "-1"])


def test_no_health_reporter_without_a_collector_or_a_spool(monkeypatch):
    args = parser().parse_args(["record"])
    assert record_command._health_reporter(args, SimpleNamespace(), 0.0) is None
    args = parser().parse_args(
        ["record", "--health-interval", "0", "--spool", "x", "--exporter", "console"]
    )
    assert record_command._health_reporter(args, SimpleNamespace(), 0.0) is None


def test_status_shows_the_health_file(tmp_path: Path):
    hm.write_health_file(str(tmp_path), _known())
    out = io.StringIO()
    reader_health(str(tmp_path), out)
    text = out.getvalue()
    assert "reader health (pid 42," in text
    assert "records: 100 read, 7 lost by the kernel, 5 invalid" in text
    assert "dropped (output: queue full): 5 span" in text
    assert "exported span: 80 taken, 11 failed" in text
    assert "failed span (HTTP 400 Bad Request): 11" in text
    assert "spool: 1 requests (300 bytes, 1 items left), 9 items spooled, 8 re-sent" in text


def test_status_refuses_a_file_that_is_not_a_snapshot(tmp_path: Path):
    (tmp_path / hm.HEALTH_FILE).write_text('{"read": 1, "unknown": 2}')
    out = io.StringIO()
    reader_health(str(tmp_path), out)
    assert out.getvalue() == f"reader health: none in {tmp_path}\n"
    (tmp_path / hm.HEALTH_FILE).unlink()
    os.symlink("/etc/hostname", tmp_path / hm.HEALTH_FILE)
    assert hm.read_health_file(str(tmp_path)) is None
