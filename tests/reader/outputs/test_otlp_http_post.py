# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``--exporter otlp_proto_http`` against collectors that refuse, dribble, answer with a
huge body or ask to retry later: a request ends by its deadline, reads a capped answer,
and retries on the output's thread, never the reader's."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporters.otlp_http_post import (  # noqa: E402
    MAX_RESPONSE_BODY,
    _retry_after,
)
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import _records  # noqa: E402
from tests.support.raw_collector import RawServer  # noqa: E402


def _writes_in_time(output: ExporterOutput, records: list[JoinedRecord]) -> None:
    """``output.write(records)`` returns within 30 s (a request deadline of 1 s, and its
    retries within it, under any load), not when the collector chooses."""
    thread = threading.Thread(target=output.write, args=(records,), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "write() still waiting on the collector"


def test_a_dribbling_collector_is_cut_at_the_requests_deadline(
    collector: Callable[..., RawServer],
) -> None:
    """An answer one byte at a time, for ever: each receive gets a byte in time, so only a
    deadline on the whole request ends it."""

    def dribble(connection: socket.socket, request: int) -> None:
        head = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 10**6
        for byte in head:
            if server.stop.is_set():
                return
            server.send(connection, bytes([byte]))
            time.sleep(0.05)

    server = collector(dribble, timeout=1)
    output = ExporterOutput("otlp_proto_http")
    _writes_in_time(output, _records())
    assert output.failed == 4  # not retried past the deadline
    output.close()


@pytest.mark.parametrize("framing", ["content-length", "until-close"])
def test_a_huge_error_body_is_not_read_past_the_cap(
    collector: Callable[..., RawServer], framing: str
) -> None:
    size = 96 * 1024 * 1024

    def huge(connection: socket.socket, request: int) -> None:
        length = f"Content-Length: {size}\r\n" if framing == "content-length" else ""
        server.send(connection, f"HTTP/1.1 400 Bad\r\n{length}Connection: close\r\n\r\n".encode())
        chunk = b"e" * 65536
        while server.sent < size and not server.stop.is_set():
            server.send(connection, chunk)

    server = collector(huge, timeout=5)
    output = ExporterOutput("otlp_proto_http")
    _writes_in_time(output, _records())
    assert output.failed == 4 and server.requests == 2  # 400: not retried
    # what the kernel's socket buffers took before the poster closed, not the body
    assert server.sent < 2 * (16 * 1024 * 1024 + MAX_RESPONSE_BODY)
    output.close()


def test_429_with_retry_after_is_honoured_on_the_output_thread(
    collector: Callable[..., RawServer],
) -> None:
    """The retry waits what the collector asked, on the output stage's thread: the read
    loop's write returns before the collector is asked again."""

    def busy_then_ok(connection: socket.socket, request: int) -> None:
        if request == 1:
            server.send(connection, b"HTTP/1.1 429 Busy\r\nRetry-After: 1\r\n")
            server.send(connection, b"Content-Length: 0\r\n\r\n")
        else:
            server.send(connection, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    server = collector(busy_then_ok, timeout=20)
    output = ExporterOutput("otlp_proto_http")
    waits: list[tuple[float, str]] = []
    assert output._direct_spans is not None
    poster = output._direct_spans._poster
    poster.sleep = lambda s: (waits.append((s, threading.current_thread().name)), time.sleep(s))
    stage = OutputStage(output, stop_timeout=30)
    stage.write(_records())
    assert server.requests <= 1  # returned before the retry
    stage.close()
    assert waits == [(1.0, "otel-userevents output")]
    assert server.requests == 3 and stage.failed == 0 and not stage.not_delivered
    assert stage.written == {"spans": 2, "logs": 2}


def test_retry_after_past_the_deadline_is_not_waited_for_nor_followed_by_a_burst(
    collector: Callable[..., RawServer],
) -> None:
    """With the exporter's client's retries (no ``retry_on_failure``), a collector asking
    for an hour is not waited for: the batch fails at once, counted, on the output's
    thread; and the next request (the logs) is not posted into the throttle either."""

    def later(connection: socket.socket, request: int) -> None:
        server.send(connection, b"HTTP/1.1 503 Later\r\nRetry-After: 3600\r\n")
        server.send(connection, b"Content-Length: 0\r\n\r\n")

    server = collector(later, timeout=5)
    stage = OutputStage(ExporterOutput("otlp_proto_http"), stop_timeout=30)
    stage.write(_records())
    stage.close()
    assert stage.failed == 4 and server.requests == 1 and not stage.not_delivered


def test_refused_connections_are_retried_on_the_output_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing listens: the retries (connection errors, backoff) run on the output's
    thread, within the request's deadline; the batches are counted failed."""
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    output = ExporterOutput("otlp_proto_http")
    waits: list[str] = []
    for sender in (output._direct_spans, output._direct_logs):
        assert sender is not None
        sender._poster.sleep = lambda s: (
            waits.append(threading.current_thread().name),
            time.sleep(s),
        )
    stage = OutputStage(output, stop_timeout=30)
    stage.write(_records())
    stage.close()
    assert waits and set(waits) == {"otel-userevents output"}
    assert stage.failed == 4 and stage.written == {"spans": 2, "logs": 2}


def test_a_connection_read_whole_is_used_again(collector: Callable[..., RawServer]) -> None:
    def ok(connection: socket.socket, request: int) -> None:
        server.send(connection, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    server = collector(ok, timeout=5)
    output = ExporterOutput("otlp_proto_http")
    for _ in range(3):
        output.write(_records())
    output.close()
    assert output.failed == 0 and server.requests == 6
    assert server.connections == 2  # one for spans, one for logs


def test_retry_after_is_read_as_the_exporter_reads_it() -> None:
    assert _retry_after("2") == 2.0 and _retry_after(" 0.5 ") == 0.5
    assert _retry_after("-5") == 0.0  # not a wait into the past
    assert _retry_after("nan") is None and _retry_after("inf") is None
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date passed
    assert (
        3500
        < (
            _retry_after(
                time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 3600))
            )
            or 0
        )
        <= 3600
    )
    assert _retry_after("soon") is None and _retry_after(None) is None
