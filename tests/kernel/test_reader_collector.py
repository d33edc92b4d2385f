# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A real collector downstream: a machine-wide reader (``--prefix '*'``) posts OTLP/HTTP
protobuf to rotel (an OpenTelemetry collector, ``rotel-agent`` of the ``rotel`` wheel),
whose own OTLP exporter posts to a sink in this test; every span, log and metric point
several apps wrote arrives at the sink equal to the apps' own OTLP encoding, each with its
resource and scope (the collector may regroup them), with and without gzip between the
reader and the collector; and with ``--spool``, nothing is lost when the collector is down
for a minute while apps write, nor when the reader is SIGKILLed during the outage.

rotel is a test requirement (.ci/run installs it): where it is missing the test fails and
says so, it does not skip."""

from __future__ import annotations

import base64
import gzip
import http.server
import importlib.util
import json
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.loopback import bring_loopback_up
from tests.support.otlp import flatten, metric_points

pytestmark = pytest.mark.kernel

APPS = 3
ROTEL = "rotel-agent"
_MESSAGES: dict[str, Any] = {
    "/v1/traces": ExportTraceServiceRequest,
    "/v1/logs": ExportLogsServiceRequest,
    "/v1/metrics": ExportMetricsServiceRequest,
}


def rotel_agent() -> str:
    """The collector's binary: on PATH, or in the ``rotel`` package (its wheel ships it
    there); a clear failure if it is not installed."""
    found = shutil.which(ROTEL)
    if found is None:
        spec = importlib.util.find_spec("rotel")
        if spec is not None and spec.origin is not None:
            candidate = Path(spec.origin).parent / ROTEL
            found = str(candidate) if candidate.is_file() else None
    if found is None:
        pytest.fail("rotel is not installed: .ci/run installs it (pip install 'rotel==0.0.1a15')")
    return found


class Sink:
    """What the collector's OTLP exporter posts, on 127.0.0.1: each request's body
    (decompressed as its Content-Encoding says), decoded with opentelemetry-proto and kept
    as OTLP/JSON (hex ids), by path."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[str, list[dict[str, Any]]] = {path: [] for path in _MESSAGES}
        self.errors: list[str] = []
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                try:
                    if encoding == "gzip":
                        body = gzip.decompress(body)
                    elif encoding == "deflate":
                        body = zlib.decompress(body)
                    message = _MESSAGES[self.path].FromString(body)
                except Exception as error:  # noqa: BLE001 - kept, and the test fails on it
                    with sink.lock:
                        sink.errors.append(f"{self.path} ({encoding}): {error!r}")
                    self.send_response(400)
                else:
                    with sink.lock:
                        sink.requests[self.path].append(_otlp_json(message))
                    self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def got(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.requests[path])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _otlp_json(message: Any) -> dict[str, Any]:
    """The protobuf JSON mapping with integer enums and hex ids: OTLP/JSON, as the apps'
    own captures are written."""
    request: dict[str, Any] = MessageToDict(message, use_integers_for_enums=True)

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key in ("traceId", "spanId", "parentSpanId"):
                if isinstance(value.get(key), str):
                    value[key] = base64.b64decode(value[key]).hex()
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(request)
    return request


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])


@pytest.fixture
def sink() -> Iterator[Sink]:
    bring_loopback_up()
    server = Sink()
    yield server
    server.close()


class Rotel:
    """rotel, taking OTLP/HTTP on 127.0.0.1 and exporting OTLP/HTTP to the sink, batching
    for at most 200 ms; started again on the same ports after a kill."""

    def __init__(self, sink: Sink, log: Path) -> None:
        self.sink, self.log = sink, log
        self.http_port, self.grpc_port = _free_port(), _free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        process = self.process = subprocess.Popen(
            [rotel_agent(), "start",
             "--otlp-http-endpoint", f"127.0.0.1:{self.http_port}",
             "--otlp-grpc-endpoint", f"127.0.0.1:{self.grpc_port}",
             "--exporter", "otlp", "--otlp-exporter-endpoint", self.sink.url,
             "--otlp-exporter-protocol", "http", "--batch-timeout", "200ms",
             "--log-file", str(self.log)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

        def listening() -> bool:
            assert process.poll() is None, process.communicate()[0]
            try:
                socket.create_connection(("127.0.0.1", self.http_port), timeout=1).close()
            except OSError:
                return False
            return True

        assert wait_until(listening, 60), "rotel did not listen within 60 s"

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None


@pytest.fixture
def collector(sink: Sink, tmp_path: Path) -> Iterator[Rotel]:
    rotel = Rotel(sink, tmp_path / "rotel.log")
    try:
        rotel.start()
        yield rotel
    finally:
        rotel.stop()


def _metric_app(prefix: str, service: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.metric_app", prefix, service],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=proc.ROOT,
    )  # fmt: skip


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_every_record_reaches_a_real_collectors_exporter_as_the_apps_encoded_it(
    prefix, tmp_path, monkeypatch, sink, collector, compression
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
    reader, _ = proc.reader(tmp_path, "--prefix", "*", "--exporter", "otlp_proto_http")
    results = []
    for n in range(APPS):  # one after the other: each is listened to from its first record
        results.append(proc.finished(proc.app(f"{prefix}c{n}", f"{prefix}-collected-{n}")))
    metrics_app = _metric_app(f"{prefix}m", f"{prefix}-metered")
    out, err = metrics_app.communicate(timeout=120)
    assert metrics_app.returncode == 0, err
    collections = json.loads(out)

    want_spans = flatten([r["spans"] for r in results], "spans")
    want_logs = flatten([r["logs"] for r in results], "logs")
    want_points = metric_points(collections)
    assert len(want_spans) == 6 * APPS and len(want_logs) == 7 * APPS
    assert sum(map(len, want_points.values())) >= 5

    def mine(kind: str, path: str, want: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in flatten(sink.got(path), kind).items() if k in want}

    def mine_points() -> dict[str, list[Any]]:
        return {k: v for k, v in metric_points(sink.got("/v1/metrics")).items() if k in want_points}

    def arrived() -> bool:
        return (
            len(mine("spans", "/v1/traces", want_spans)) == len(want_spans)
            and len(mine("logs", "/v1/logs", want_logs)) == len(want_logs)
            and sum(map(len, mine_points().values())) >= sum(map(len, want_points.values()))
        )

    arrived_in_time = wait_until(arrived, 120)
    err = proc.stop(reader)
    assert sink.errors == []
    assert arrived_in_time, (err, {p: len(sink.got(p)) for p in _MESSAGES})
    # record by record, each with its resource and scope as the app encoded them
    assert mine("spans", "/v1/traces", want_spans) == want_spans
    assert mine("logs", "/v1/logs", want_logs) == want_logs
    assert mine_points() == want_points
    assert "not written" not in err and "dropped" not in err and "not delivered" not in err, err


OUTAGE = 60.0
"""Seconds the collector is down in the outage test (at least)."""


def _all_of(requests: list[dict[str, Any]], kind: str) -> dict[str, str]:
    """:func:`flatten`, but a record delivered twice (at least once) is kept once, and must
    be the same each time."""
    flat: dict[str, str] = {}
    for request in requests:
        for key, text in flatten([request], kind).items():
            assert flat.setdefault(key, text) == text, key
    return flat


def _spooled_records(spool: Path) -> int:
    """Spans and logs in the spool's segments, from their headers (the reader's format:
    8-byte magic, version, kind, reserved, records)."""
    total = 0
    for segment in spool.glob("*.seg"):
        with segment.open("rb") as file:
            header = file.read(24)
        if len(header) == 24 and header[:8] == b"OTUSPOOL" and header[9] in (1, 2):
            total += int.from_bytes(header[12:16], "little")
    return total


def test_an_outage_and_a_killed_reader_lose_nothing_with_a_spool(
    prefix, tmp_path, monkeypatch, sink, collector
):
    """The collector killed for :data:`OUTAGE` s while apps keep writing: their records
    wait in the spool; the reader is SIGKILLed during the outage once they are spooled, and
    the next one, with the same spool, spools more and, when the collector is back, sends
    it all: every span and log arrives, as the apps encoded it."""
    spool = tmp_path / "spool"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")  # spooled 2 s after the outage
    command = ("--prefix", "*", "--exporter", "otlp_proto_http", "--spool", str(spool))
    reader, _ = proc.reader(tmp_path, *command)
    results = [proc.finished(proc.app(f"{prefix}u0", f"{prefix}-outage-0"))]
    want = lambda kind: flatten([r[kind] for r in results], kind)  # noqa: E731

    def arrived() -> bool:
        return all(
            set(want(kind)) <= set(_all_of(sink.got(path), kind))
            for kind, path in (("spans", "/v1/traces"), ("logs", "/v1/logs"))
        )

    assert wait_until(arrived, 120)  # the collector is up: straight through
    collector.kill()
    down = time.monotonic()
    for n in (1, 2):  # written while the collector is down
        results.append(proc.finished(proc.app(f"{prefix}u{n}", f"{prefix}-outage-{n}")))
    assert wait_until(lambda: _spooled_records(spool) >= 26, 120), _spooled_records(spool)
    reader.kill()  # SIGKILL: what it spooled is on disk
    reader.communicate()
    assert stat.S_IMODE(spool.stat().st_mode) == 0o700
    assert {stat.S_IMODE(f.stat().st_mode) for f in spool.glob("*.seg")} == {0o600}

    reader, _ = proc.reader(tmp_path, *command)  # the next reader, the same spool
    results.append(proc.finished(proc.app(f"{prefix}u3", f"{prefix}-outage-3")))
    assert wait_until(lambda: _spooled_records(spool) >= 39, 120), _spooled_records(spool)
    time.sleep(max(0.0, OUTAGE - (time.monotonic() - down)))
    collector.start()  # back, on the same port
    came_back = time.monotonic()
    assert wait_until(arrived, 180), "the spool was not sent within 180 s"
    resent_in = time.monotonic() - came_back
    err = proc.stop(reader)

    for kind, path in (("spans", "/v1/traces"), ("logs", "/v1/logs")):
        got = _all_of(sink.got(path), kind)
        assert {k: got[k] for k in want(kind)} == want(kind)  # record by record
    assert len(want("spans")) == 6 * 4 and len(want("logs")) == 7 * 4
    assert list(spool.glob("*.seg")) == [], err
    assert re.search(r"\d+ spans and \d+ logs re-sent from the spool", err), err
    assert "not delivered" not in err and "not written" not in err, err
    print(f"outage {came_back - down:.0f} s; the spool sent {resent_in:.0f} s after")
