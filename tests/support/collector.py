# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A real collector for the tests: rotel (``rotel-agent`` of the ``rotel`` wheel) taking
OTLP/HTTP and OTLP/gRPC on 127.0.0.1 and exporting OTLP/HTTP to a :class:`Sink` that keeps
what arrives as OTLP/JSON."""

from __future__ import annotations

import base64
import gzip
import http.server
import importlib.util
import shutil
import socket
import subprocess
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.kernel_support import wait_until

ROTEL = "rotel-agent"
MESSAGES: dict[str, Any] = {
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
    as OTLP/JSON (hex ids), by path (:meth:`keep`: a subclass may keep less)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[str, list[dict[str, Any]]] = {path: [] for path in MESSAGES}
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
                    sink.keep(self.path, MESSAGES[self.path].FromString(body))
                except Exception as error:  # noqa: BLE001 - kept, and the test fails on it
                    with sink.lock:
                        sink.errors.append(f"{self.path} ({encoding}): {error!r}")
                    self.send_response(400)
                else:
                    self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keep(self, path: str, message: Any) -> None:
        """A request taken: kept as OTLP/JSON."""
        with self.lock:
            self.requests[path].append(otlp_json_of(message))

    def got(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.requests[path])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def otlp_json_of(message: Any) -> dict[str, Any]:
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


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])


class Rotel:
    """rotel, taking OTLP/HTTP (``url``) and OTLP/gRPC (``grpc_url``) on 127.0.0.1 and
    exporting OTLP/HTTP to the sink, batching for at most 200 ms; started again on the same
    ports after a kill."""

    def __init__(self, sink: Sink, log: Path) -> None:
        self.sink, self.log = sink, log
        self.http_port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.grpc_url = f"http://127.0.0.1:{self.grpc_port}"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        # its console output to a file: a pipe nobody reads would stop it once full
        console = self.log.with_suffix(".console").open("a")
        process = self.process = subprocess.Popen(
            [rotel_agent(), "start",
             "--otlp-http-endpoint", f"127.0.0.1:{self.http_port}",
             "--otlp-grpc-endpoint", f"127.0.0.1:{self.grpc_port}",
             "--exporter", "otlp", "--otlp-exporter-endpoint", self.sink.url,
             "--otlp-exporter-protocol", "http", "--batch-timeout", "200ms",
             "--log-file", str(self.log)],
            stdout=console, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        console.close()

        def listening() -> bool:
            assert process.poll() is None, self.console()
            try:
                for port in (self.http_port, self.grpc_port):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return False
            return True

        assert wait_until(listening, 60), "rotel did not listen within 60 s"

    def console(self) -> str:
        """What rotel printed (its last 4,000 characters)."""
        try:
            return self.log.with_suffix(".console").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None


@contextmanager
def running_rotel(sink: Sink, log: Path) -> Iterator[Rotel]:
    """rotel started for the block, stopped after it (also when it failed to start)."""
    rotel = Rotel(sink, log)
    try:
        rotel.start()
        yield rotel
    finally:
        rotel.stop()
