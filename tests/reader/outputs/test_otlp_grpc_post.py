# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``--exporter otlp_proto_grpc`` sends the bytes made straight from checked records as the
exporter would, to an in-process gRPC collector that answers as a test says: the same
requests as the exporter's own (content, headers as metadata, gzip on the wire), retries as
the OTLP specification says (``UNAVAILABLE``, ``RESOURCE_EXHAUSTED`` with ``RetryInfo``
and its delay), codes not retried counted and not spooled, ``partial_success`` rejections
counted, the deadline kept against a collector that never answers, and the spool, as for
OTLP/HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")

from google.rpc import error_details_pb2, status_pb2  # noqa: E402
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: E402
    ExportLogsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage  # noqa: E402
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import metrics_data  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import DEADLINE  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Spool  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_grpc_post  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporters.otlp_grpc_post import (  # noqa: E402
    GrpcPoster,
    retry_delay,
)
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import _records  # noqa: E402
from tests.support.kernel_support import wait_until  # noqa: E402
from tests.test_metric_exporter import _collection  # noqa: E402
from tests.test_metric_exporter import _records as _metric_records  # noqa: E402

_SERVICES = {
    "opentelemetry.proto.collector.trace.v1.TraceService": "spans",
    "opentelemetry.proto.collector.logs.v1.LogsService": "logs",
    "opentelemetry.proto.collector.metrics.v1.MetricsService": "metrics",
}
Answer = Callable[[bytes, Any], bytes]
"""How the collector answers one call: the response bytes, or ``context.abort``."""


def ok(request: bytes, context: Any) -> bytes:
    return b""


def fail(code: Any, message: str = "", delay: float | None = None, trailer: bool = False) -> Answer:
    """An answer that fails the call with ``code``, and a ``RetryInfo`` of ``delay`` s in
    the status details (or, ``trailer``, in the trailer the exporter reads)."""

    def answer(request: bytes, context: Any) -> bytes:
        if delay is not None:
            info = error_details_pb2.RetryInfo()
            info.retry_delay.FromNanoseconds(int(delay * 1e9))
            if trailer:
                metadata = (("google.rpc.retryinfo-bin", info.SerializeToString()),)
            else:
                status = status_pb2.Status(code=code.value[0], message=message)
                status.details.add().Pack(info)
                metadata = (("grpc-status-details-bin", status.SerializeToString()),)
            context.set_trailing_metadata(metadata)
        context.abort(code, message)
        return b""  # not reached: abort raises

    return answer


class Collector:
    """An OTLP/gRPC collector on 127.0.0.1 (a port of its own, or ``port``): keeps each
    call (signal, request bytes, metadata) and answers with the next of ``answers``, then
    OK."""

    def __init__(self, port: int = 0) -> None:
        self.calls: list[tuple[str, bytes, dict[str, str]]] = []
        self.answers: list[Answer] = []
        self.lock = threading.Lock()
        handlers = [
            grpc.method_handlers_generic_handler(
                service, {"Export": grpc.unary_unary_rpc_method_handler(self._handler(kind))}
            )
            for service, kind in _SERVICES.items()
        ]
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        self.server.add_generic_rpc_handlers(handlers)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.url = f"http://127.0.0.1:{self.port}"
        self.server.start()

    def _handler(self, kind: str) -> Callable[[bytes, Any], bytes]:
        def export(request: bytes, context: Any) -> bytes:
            with self.lock:
                self.calls.append((kind, request, dict(context.invocation_metadata())))
                answer = self.answers.pop(0) if self.answers else ok
            return answer(request, context)

        return export

    def kinds(self) -> list[str]:
        with self.lock:
            return [kind for kind, _request, _metadata in self.calls]

    def close(self) -> None:
        self.server.stop(0).wait()


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ENDPOINT", "HEADERS", "COMPRESSION", "TIMEOUT", "INSECURE"):
        for signal in ("", "TRACES_", "LOGS_", "METRICS_"):
            monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{signal}{name}", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_EXPORTER_OTLP_GRPC_RETRYABLE_ERROR_CODES", raising=False)


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Collector]:
    _clean_environment(monkeypatch)
    server = Collector()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
    yield server
    server.close()


def _poster(url: str, sleeps: list[float], timeout: float = 10.0, kind: str = "spans") -> Any:
    """The spans sender's poster of an ``otlp_proto_grpc`` output, sleeping into
    ``sleeps`` (the backoffs asked for) instead of waiting."""
    output = ExporterOutput("otlp_proto_grpc")
    sender = {"spans": output._direct_spans, "logs": output._direct_logs}[kind]
    assert sender is not None
    poster = sender._poster
    assert isinstance(poster, GrpcPoster) and poster.target == url.removeprefix("http://")
    poster.sleep, poster.timeout = sleeps.append, timeout
    return poster


def test_the_same_requests_as_the_exporter(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter's own request bytes (of the SDK objects of the same records), with the
    user's headers as metadata, the signal's own replacing the general ones; nothing
    dropped, and the output builds no SDK object."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=t1,authorization=Bearer%20x")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "x-tenant=logs")
    records = _records()
    output = ExporterOutput("otlp_proto_grpc")
    assert not output.sdk_objects
    output.write(records)
    output.close()
    assert output.failed == 0 and collector.kinds() == ["spans", "logs"]
    direct = list(collector.calls)
    collector.calls.clear()
    exporter = ExporterOutput("otlp_proto_grpc", direct=False)  # the exporter's export()
    assert exporter.sdk_objects
    exporter.write(records)
    exporter.close()
    assert exporter.failed == 0 and collector.kinds() == ["spans", "logs"]
    assert direct == collector.calls  # the same bytes, the same metadata
    (_, spans, span_metadata), (_, logs, log_metadata) = direct
    assert [s.name for s in ExportTraceServiceRequest.FromString(spans).resource_spans[0]
            .scope_spans[0].spans] == ["GET /cart/{id}", "other"]  # fmt: skip
    assert len(ExportLogsServiceRequest.FromString(logs).resource_logs[0].scope_logs[0]
               .log_records) == 2  # fmt: skip
    assert (span_metadata["x-tenant"], span_metadata["authorization"]) == ("t1", "Bearer x")
    assert log_metadata["x-tenant"] == "logs" and "authorization" not in log_metadata
    assert span_metadata["user-agent"].startswith("OTel-OTLP-Exporter-Python/")
    delivered = output.delivered()
    assert (delivered["spans"][0], delivered["logs"][0]) == (2, 2)


def test_metric_points_are_sent_as_the_exporter_encodes_them(collector: Collector) -> None:
    points = JoinStage().add(_metric_records(_collection()))
    assert points
    output = ExporterOutput("otlp_proto_grpc")
    assert output._direct_metrics is not None
    output.write(points)
    assert output.metrics.export(metrics_data(points)).name == "SUCCESS"  # the exporter's own
    output.close()
    assert output.failed == 0 and collector.kinds() == ["metrics", "metrics"]
    assert collector.calls[0][1] == collector.calls[1][1]  # the same bytes


def test_unavailable_is_retried_with_backoff_then_taken(collector: Collector) -> None:
    sleeps: list[float] = []
    poster = _poster(collector.url, sleeps)
    collector.answers = [fail(grpc.StatusCode.UNAVAILABLE, "restarting")] * 2
    delivery = poster.deliver(b"request")
    poster.close()
    assert delivery.taken and not delivery.rejected
    assert [request for _kind, request, _ in collector.calls] == [b"request"] * 3
    assert len(sleeps) == 2 and 0.8 <= sleeps[0] <= 1.2 and 1.6 <= sleeps[1] <= 2.4


@pytest.mark.parametrize("trailer", [False, True])
def test_resource_exhausted_with_retry_info_waits_as_asked(
    collector: Collector, trailer: bool
) -> None:
    """The delay of the status details' ``RetryInfo`` (or of the exporter's trailer)."""
    sleeps: list[float] = []
    poster = _poster(collector.url, sleeps)
    collector.answers = [fail(grpc.StatusCode.RESOURCE_EXHAUSTED, "full", 0.25, trailer)]
    delivery = poster.deliver(b"request")
    poster.close()
    assert delivery.taken and len(collector.calls) == 2 and sleeps == [0.25]


def test_a_retry_info_past_the_deadline_is_not_waited_for(collector: Collector) -> None:
    sleeps: list[float] = []
    poster = _poster(collector.url, sleeps, timeout=2.0)
    collector.answers = [fail(grpc.StatusCode.RESOURCE_EXHAUSTED, "full", 30.0)]
    delivery = poster.deliver(b"request")
    poster.close()
    assert not delivery.taken and delivery.later and sleeps == []
    assert delivery.reason == "gRPC RESOURCE_EXHAUSTED after 1 attempts"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("RESOURCE_EXHAUSTED", "too large"),  # without RetryInfo: no recovery said
        ("INVALID_ARGUMENT", "bad \x1b[2J request"),
        ("PERMISSION_DENIED", ""),
        ("UNIMPLEMENTED", "no logs here"),
    ],
)
def test_a_code_not_retried_is_counted_and_not_spooled(
    collector: Collector, tmp_path: Path, code: str, message: str
) -> None:
    output = ExporterOutput("otlp_proto_grpc")
    spool = Spool(str(tmp_path / "spool"), 1 << 20)
    output.use_spool(spool)
    collector.answers = [fail(grpc.StatusCode[code], message)]
    output.write(_records())
    output.close()
    assert collector.kinds() == ["spans", "logs"]  # one call each: not retried
    assert output.failed == 2  # the spans; the logs went through
    shown = message.replace("\x1b", "?")
    reason = f"gRPC {code}: {shown}" if message else f"gRPC {code}"
    assert output.failed_by_reason() == {reason: 2}
    assert spool.counts() == (0, 0)
    assert output.delivered()["logs"][0] == 2


def test_partial_success_rejections_are_counted(collector: Collector) -> None:
    response = ExportTraceServiceResponse()
    response.partial_success.rejected_spans = 1
    response.partial_success.error_message = "span too old"
    collector.answers = [lambda request, context: response.SerializeToString()]
    output = ExporterOutput("otlp_proto_grpc")
    output.write(_records())
    output.close()
    assert output.failed == 1
    assert output.failed_by_reason() == {"rejected by the collector: span too old": 1}
    assert (output.delivered()["spans"][0], output.delivered()["logs"][0]) == (1, 2)


def test_a_collector_that_never_answers_costs_the_timeout(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call's deadline is what is left of the request's: not retried past it, and the
    request may be taken later (a spool keeps it)."""
    answered = threading.Event()

    def never(request: bytes, context: Any) -> bytes:
        answered.wait(30)
        return b""

    collector.answers = [never]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    poster = _poster(collector.url, [], timeout=1.0)
    started = time.monotonic()
    delivery = poster.deliver(b"request")
    took = time.monotonic() - started
    answered.set()
    poster.close()
    assert not delivery.taken and delivery.later and delivery.reason == DEADLINE
    assert 0.9 <= took < 3, took


def test_no_collector_is_counted_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_environment(monkeypatch)
    with socket.create_server(("127.0.0.1", 0)) as sock:  # a port nobody listens on
        port = sock.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")  # no time for a backoff
    output = ExporterOutput("otlp_proto_grpc")
    output.write(_records())
    output.close()
    assert output.failed == 4
    assert output.failed_by_reason() == {"gRPC UNAVAILABLE after 1 attempts": 4}


def test_what_the_collector_did_not_take_is_spooled_then_resent_when_it_is_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The collector down: the requests go to the spool after their retries; back (on the
    same port), the stage's thread sends the spool, oldest first, while nothing else is
    written."""
    _clean_environment(monkeypatch)
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")
    output = ExporterOutput("otlp_proto_grpc")
    spool = Spool(str(tmp_path / "spool"), 1 << 20)
    output.use_spool(spool)
    stage = OutputStage(output, stop_timeout=30)
    stage.write(_records())
    assert wait_until(lambda: spool.counts()[0] == 2, 30)  # a spans and a logs request
    assert stage.failed == 0
    server = Collector(port)
    try:
        # the stage's thread tries the spool after IDLE_SECONDS with nothing to write
        assert wait_until(lambda: spool.counts() == (0, 0), 30)
        assert server.kinds() == ["spans", "logs"]
        stage.close()
        assert stage.failed == 0
        assert "2 spans and 2 logs re-sent from the spool" in stage.parts()
    finally:
        server.close()


def test_gzip_compresses_on_the_wire(collector: Collector, monkeypatch: pytest.MonkeyPatch) -> None:
    """``OTEL_EXPORTER_OTLP_COMPRESSION=gzip`` as the exporter reads it: the channel
    compresses (counted between the poster and the collector), the collector gets the
    request whole."""
    request = b"compressible " * 20000
    sent = {}
    for compression in ("none", "gzip"):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
        if compression == "none":
            monkeypatch.delenv("OTEL_EXPORTER_OTLP_COMPRESSION")  # the exporter's default
        with _Relay(collector.port) as relay:
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{relay.port}")
            poster = _poster(f"http://127.0.0.1:{relay.port}", [])
            assert poster.deliver(request).taken
            poster.close()
            sent[compression] = relay.sent()
        assert collector.calls[-1][1] == request
    assert sent["none"] > len(request) > 20 * sent["gzip"], sent


class _Relay:
    """A TCP relay to the collector's port that counts the bytes sent to it."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> _Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        try:
            while data := source.recv(65536):
                if upstream:
                    with self.lock:
                        self.upstream += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def sent(self) -> int:
        with self.lock:
            return self.upstream


def test_retry_delay_reads_retry_info_and_nothing_else() -> None:
    info = error_details_pb2.RetryInfo()
    info.retry_delay.FromNanoseconds(1_500_000_000)
    status = status_pb2.Status(code=8)
    status.details.add().Pack(info)
    assert retry_delay((("grpc-status-details-bin", status.SerializeToString()),)) == 1.5
    assert retry_delay((("google.rpc.retryinfo-bin", info.SerializeToString()),)) == 1.5
    assert retry_delay((("grpc-status-details-bin", b"\xff\xff not a status"),)) is None
    assert (
        retry_delay((("grpc-status-details-bin", status_pb2.Status().SerializeToString()),)) is None
    )
    assert retry_delay(None) is None and retry_delay(()) is None
    info.retry_delay.FromNanoseconds(-5)
    assert retry_delay((("google.rpc.retryinfo-bin", info.SerializeToString()),)) == 0.0


def test_a_retryable_codes_setting_replaces_the_specifications(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``OTEL_PYTHON_EXPORTER_OTLP_GRPC_RETRYABLE_ERROR_CODES``, as the exporter reads it:
    its codes retried (``INTERNAL`` here), the others not (``UNAVAILABLE``)."""
    monkeypatch.setenv("OTEL_PYTHON_EXPORTER_OTLP_GRPC_RETRYABLE_ERROR_CODES", "INTERNAL")
    sleeps: list[float] = []
    poster = _poster(collector.url, sleeps)
    collector.answers = [fail(grpc.StatusCode.INTERNAL, "oops")]
    assert poster.deliver(b"request").taken and len(sleeps) == 1
    collector.answers = [fail(grpc.StatusCode.UNAVAILABLE)]
    delivery = poster.deliver(b"request")
    poster.close()
    assert not delivery.taken and not delivery.later and len(sleeps) == 1
    assert otlp_grpc_post.RETRYABLE != poster.retryable
