# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``--exporter otlp_proto_http`` posts the bytes made straight from checked records as the
exporter's own client would: to a local receiver, the same requests as the exporter sends
for the SDK objects of the same records (URL path, headers, compression, content), the
exporter's retries and failures, counted and never raised; and SDK objects where the
client is not there. Collectors that misbehave: tests/reader/outputs/test_otlp_http_post.py."""

from __future__ import annotations

import gzip
import http.server
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: E402
    OTLPMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: E402
    ExportLogsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from benchmarks import reader_export  # noqa: E402
from opentelemetry_exporter_userevents._export.log_encoder import encode_log  # noqa: E402
from opentelemetry_exporter_userevents._export.span_encoder import encode_span  # noqa: E402
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD  # noqa: E402
from opentelemetry_exporter_userevents.reader import cli  # noqa: E402
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord, JoinStage  # noqa: E402
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import metrics_data  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporters import (
    direct_sender,
    otlp_json,
    sdk_objects,  # noqa: E402
)
from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_objects import sdk_object  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from opentelemetry_exporter_userevents.record import schema  # noqa: E402
from tests.reader.capture.test_capture import _capture, _encodable, _pages, _resource_payload  # noqa: E402
from tests.reader.capture.test_capture import _records as _capture_records  # noqa: E402
from tests.reader.outputs.test_otlp_proto_direct import _joined, _log, _span  # noqa: E402
from tests.support.captures import format_text  # noqa: E402
from tests.support.pages import data_event, page, record  # noqa: E402
from tests.support.span_fixtures import make_logs, make_spans  # noqa: E402
from tests.test_metric_exporter import _collection  # noqa: E402
from tests.test_metric_exporter import _records as _metric_records  # noqa: E402


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1: keeps each request (path, headers, body) and
    answers with the next of ``statuses`` (then 200), an empty protobuf response."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.statuses: list[int] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.requests.append((self.path, headers, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                if status != 200:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def bodies(self, path: str) -> list[bytes]:
        """The requests' bodies to ``path``, uncompressed."""
        return [
            gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body
            for got_path, headers, body in self.requests
            if got_path == path
        ]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    receiver = Receiver()
    for name in ("ENDPOINT", "HEADERS", "COMPRESSION", "TIMEOUT"):
        for signal in ("", "TRACES_", "LOGS_"):
            monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{signal}{name}", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    yield receiver
    receiver.close()


def _records() -> list[JoinedRecord]:
    return _joined(_span(), _span(span_id=3, name="other"), _log(), _log(body={"k": [1, 2.5]}))


def _as_sdk_objects(records: list[JoinedRecord]) -> list[Any]:
    return [sdk_object(joined) for joined in records]


def _send(records: list[JoinedRecord], direct: bool) -> ExporterOutput:
    """The join's records to the exporter output: posted straight, or (``direct`` False)
    built into SDK objects by the output and handed to the exporter."""
    output = ExporterOutput("otlp_proto_http", direct=direct)
    assert output.sdk_objects is not direct
    output.write(records)
    output.close()
    return output


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_the_same_requests_as_the_exporter(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, compression: str
) -> None:
    """The same paths, headers (content type, compression, user agent, the user's) and
    content; only the transport's own differ (the poster asks for an uncompressed answer:
    its capped read is all there is)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=t1,authorization=Bearer%20x")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "x-tenant=logs")
    records = _records()
    assert _send(records, direct=True).failed == 0
    direct = list(receiver.requests)
    receiver.requests.clear()
    assert _send(records, direct=False).failed == 0
    exporter = list(receiver.requests)
    assert [r[0] for r in direct] == [r[0] for r in exporter] == ["/v1/traces", "/v1/logs"]
    for (path, got_headers, got), (_, want_headers, want) in zip(direct, exporter, strict=True):
        transport = {"accept", "accept-encoding", "connection"}
        assert {k: v for k, v in got_headers.items() if k not in transport} == {
            k: v for k, v in want_headers.items() if k not in transport
        }
        assert got_headers["accept-encoding"] == "identity" and "user-agent" in got_headers
        assert got_headers["content-type"] == "application/x-protobuf"
        assert got_headers.get("content-encoding") == ("gzip" if compression == "gzip" else None)
        if path == "/v1/traces":
            assert (got_headers["x-tenant"], got_headers["authorization"]) == ("t1", "Bearer x")
        else:  # the signal's own headers replace the general ones
            assert got_headers["x-tenant"] == "logs" and "authorization" not in got_headers
        if compression == "gzip":
            got, want = gzip.decompress(got), gzip.decompress(want)
        assert got == want
    spans = ExportTraceServiceRequest.FromString(receiver.bodies("/v1/traces")[0])
    assert [s.name for s in spans.resource_spans[0].scope_spans[0].spans] == [
        "GET /cart/{id}",
        "other",
    ]
    logs = ExportLogsServiceRequest.FromString(receiver.bodies("/v1/logs")[0])
    assert len(logs.resource_logs[0].scope_logs[0].log_records) == 2


def test_the_signal_endpoints(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.url}/t")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", f"{receiver.url}/l")
    assert _send(_records(), direct=True).failed == 0
    assert [r[0] for r in receiver.requests] == ["/t", "/l"]


def test_retried_as_the_exporter_retries(receiver: Receiver) -> None:
    """503 and 429 (with Retry-After: 0) are retried; the batch then goes through."""
    receiver.statuses = [503, 429]
    output = _send(_records(), direct=True)
    assert output.failed == 0
    assert [r[0] for r in receiver.requests] == ["/v1/traces"] * 3 + ["/v1/logs"]
    assert len({r[2] for r in receiver.requests[:3]}) == 1  # the same request again


def test_a_refused_request_is_counted_not_raised(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.statuses = [400]
    with caplog.at_level(logging.ERROR):
        output = _send(_records(), direct=True)
    assert output.failed == 2  # the spans; the logs went through
    assert [r[0] for r in receiver.requests] == ["/v1/traces", "/v1/logs"]  # 400: no retry
    assert "Failed to export spans batch code: 400" in caplog.text


def test_no_receiver_is_counted_not_raised(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver.close()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")  # no time for a backoff
    output = _send(_records(), direct=True)
    assert output.failed == 4


def test_metric_points_are_posted_as_the_exporter_posts_them(receiver: Receiver) -> None:
    """The exporter's own encoding of the same MetricsData, to ``/v1/metrics``, through the
    poster (its deadline and capped answer); the exporter's export() where it splits."""
    points = JoinStage().add(_metric_records(_collection()))
    assert points
    output = ExporterOutput("otlp_proto_http")
    assert output._direct_metrics is not None
    output.write(points)
    direct = list(receiver.requests)
    receiver.requests.clear()
    assert output.metrics.export(metrics_data(points)).name == "SUCCESS"
    output.close()
    assert output.failed == 0
    assert [r[0] for r in direct] == [r[0] for r in receiver.requests] == ["/v1/metrics"]
    assert direct[0][2] == receiver.requests[0][2]  # the same bytes
    assert direct_sender.direct_sender(OTLPMetricExporter(), "metrics") is not None
    splitting = OTLPMetricExporter(max_export_batch_size=10)
    assert direct_sender.direct_sender(splitting, "metrics") is None


def test_a_record_the_encoder_cannot_carry_is_left_out(receiver: Receiver) -> None:
    """The exporter fails a whole batch for it; the direct path sends the others."""
    output = _send(_joined(_span(), _span(name="\ud800"), _log(body=2**64)), direct=True)
    assert output.failed == 2
    assert [r[0] for r in receiver.requests] == ["/v1/traces"]


def test_a_request_over_the_size_limit_is_dropped(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = ExporterOutput("otlp_proto_http")
    sender = output._direct_spans
    assert sender is not None
    monkeypatch.setattr(sender, "_max_request_size", 10)
    output.write(_records())
    output.close()
    assert output.failed == 2
    assert [r[0] for r in receiver.requests] == ["/v1/logs"]


def test_sdk_objects_where_the_client_is_not_known(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the exporter's client (another version), with the exporter's own metrics
    enabled, or for another exporter, the exporter gets SDK objects."""
    exporter = OTLPSpanExporter()
    assert direct_sender.direct_sender(exporter, "spans") is not None
    del exporter._client
    assert direct_sender.direct_sender(exporter, "spans") is None

    class Subclass(OTLPLogExporter):
        pass

    assert direct_sender.direct_sender(Subclass(), "logs") is None
    assert direct_sender.direct_sender(OTLPLogExporter(), "spans") is None
    monkeypatch.setenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "true")
    assert direct_sender.direct_sender(OTLPLogExporter(), "logs") is None
    output = ExporterOutput("otlp_proto_http")
    assert output.sdk_objects
    output.write(_records())  # joined records: the output builds their SDK objects
    output.write(_as_sdk_objects(_records()))  # SDK objects: as they are
    output.close()
    assert output.failed == 0
    assert [r[0] for r in receiver.requests] == ["/v1/traces", "/v1/logs"] * 2
    bodies = [body for _, _, body in receiver.requests]
    assert bodies[:2] == bodies[2:]  # the same bytes either way
    monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED")
    monkeypatch.setattr(direct_sender, "direct_sender", lambda exporter, kind: None)
    assert ExporterOutput("otlp_proto_http").sdk_objects
    assert ExporterOutput("console").sdk_objects


def test_cli_decode_posts_what_the_app_handed_to_the_sdk(
    receiver: Receiver, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``decode CAPTURE --exporter otlp_proto_http``: the receiver gets the app's spans and
    logs as its OTLP encoder makes them, with no SDK object built in the reader."""
    spans, logs, raws = _capture_records(
        _encodable(make_spans(), otlp_json.spans_request),
        _encodable(make_logs(), otlp_json.logs_request),
    )
    built: list[Any] = []
    original_span, original_log = sdk_objects.readable_span, sdk_objects.readable_log
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sdk_objects, "readable_span", lambda *a: built.append(a) or original_span(*a))
        patch.setattr(sdk_objects, "readable_log", lambda *a: built.append(a) or original_log(*a))
        assert (
            cli.main(["decode", _capture(tmp_path, _pages(raws)), "--exporter", "otlp_proto_http"])
            == 0
        )
    assert built == []  # no SDK object
    got_spans = [
        span
        for body in receiver.bodies("/v1/traces")
        for r in ExportTraceServiceRequest.FromString(body).resource_spans
        for s in r.scope_spans
        for span in s.spans
    ]
    want_spans = [
        span for r in encode_spans(spans).resource_spans for s in r.scope_spans for span in s.spans
    ]
    assert got_spans == want_spans and got_spans
    got_logs = [
        log
        for body in receiver.bodies("/v1/logs")
        for r in ExportLogsServiceRequest.FromString(body).resource_logs
        for s in r.scope_logs
        for log in s.log_records
    ]
    want_logs = [
        log for r in encode_logs(logs).resource_logs for s in r.scope_logs for log in s.log_records
    ]
    assert got_logs == want_logs and got_logs
    assert "not written" not in capsys.readouterr().err


def test_the_export_benchmark_runs(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/reader_export.py on a small capture of the fixtures' spans and logs (every
    value kind OTLP carries): both ways deliver every record, in the same bytes."""
    for name in ("ENDPOINT", "HEADERS", "COMPRESSION", "TIMEOUT"):
        for signal in ("", "TRACES_", "LOGS_"):
            monkeypatch.setenv(f"OTEL_EXPORTER_OTLP_{signal}{name}", "")  # restored after
    monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", raising=False)
    ids = {"span": 401, "log": 402, "resource": 403}
    formats = [
        ("user_events_multi", format_text(schema.SPAN, "bench_span.1f", ids["span"])),
        ("user_events_multi", format_text(schema.LOG, "bench_log_info.1f", ids["log"])),
        ("user_events_multi", format_text(schema.RESOURCE, "bench_resource.1f", ids["resource"])),
    ]
    rid, resource = _resource_payload()
    spans = _encodable(make_spans(), otlp_json.spans_request)
    logs = _encodable(make_logs(), otlp_json.logs_request)
    raws = {
        "span": [record(ids["span"], encode_span(s, rid, FTRACE_MAX_PAYLOAD)[0]) for s in spans],
        "log": [record(ids["log"], encode_log(g, rid, FTRACE_MAX_PAYLOAD)[0]) for g in logs],
    }
    pages = {
        kind: [
            page(1000 + 10 * n, [data_event(0, raw)]).hex()
            for n, raw in enumerate([record(ids["resource"], resource), *kind_raws])
        ]
        for kind, kind_raws in raws.items()
    }
    path = tmp_path / "pages.json"
    path.write_text(json.dumps({"formats": formats, "lost": 0, "written": 0, "pages": pages}))
    for compression in ("none", "gzip"):
        figures = reader_export.measure(path, 2, None, compression)
        assert figures["span"]["items"] == len(spans) and figures["log"]["items"] == len(logs)
        assert figures["span"]["direct_per_s"] > 0 and figures["log"]["sdk_per_s"] > 0
