# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The collector load benchmark's host parts: the proxy passes requests through and fails
as it is told, the sink counts a record delivered twice, and the report adds up."""

from __future__ import annotations

import http.client
import http.server
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from benchmarks import collector_load, fault_proxy
from benchmarks.counting_sink import CountingSink


@pytest.fixture
def upstream() -> Iterator[http.server.ThreadingHTTPServer]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"up")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _post(url: str, timeout: float = 10) -> tuple[int, bytes, dict[str, str]]:
    parsed = urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
    connection.request("POST", "/v1/traces", body=b"x" * 1000)
    answer = connection.getresponse()
    length = min(int(answer.headers.get("Content-Length", "0")), 100)
    body = answer.read(length)
    connection.close()
    return answer.status, body, dict(answer.headers)


def _dribbled(url: str, seconds: float) -> bytes:
    parsed = urlparse(url)
    assert parsed.hostname is not None and parsed.port is not None
    got = b""
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as connection:
        connection.sendall(b"POST /v1/traces HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            connection.settimeout(left)
            try:
                got += connection.recv(100)
            except TimeoutError:
                break
    return got


def test_the_proxy_passes_requests_and_answers_in_each_failing_mode(upstream) -> None:
    proxy = fault_proxy.FaultProxy(upstream.server_address[1])
    assert _post(proxy.url)[:2] == (200, b"up")
    proxy.set_mode("429")
    status, _, headers = _post(proxy.url)
    assert status == 429 and headers["Retry-After"] == str(fault_proxy.RETRY_AFTER)
    proxy.set_mode("429 60")
    status, _, headers = _post(proxy.url)
    assert status == 429 and headers["Retry-After"] == str(fault_proxy.LONG_RETRY_AFTER) == "60"
    proxy.set_mode("500")
    assert _post(proxy.url)[0] == 500
    proxy.set_mode("huge")
    status, _, headers = _post(proxy.url)
    assert status == 503 and int(headers["Content-Length"]) == fault_proxy.HUGE
    proxy.set_mode("dribble")
    assert _dribbled(proxy.url, seconds=fault_proxy.DRIBBLE * 4) in {
        b"HTTP/1.1 200 OK"[:n] for n in range(1, 7)
    }  # a byte at a time: a few bytes of the status line in 4 periods
    proxy.set_mode("pass")
    assert _post(proxy.url)[:2] == (200, b"up")
    assert proxy.answered == {"pass": 2, "dribble": 1, "429": 1, "429 60": 1, "500": 1, "huge": 1}
    assert [mode for _at, mode in proxy.log] == ["pass", "429", "429 60", "500", "huge", "dribble",
                                                 "pass"]  # fmt: skip


def test_a_down_collector_is_a_closed_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    proxy = fault_proxy.FaultProxy(port)  # nothing listens there
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        _post(proxy.url)


def test_the_sink_counts_each_record_once_and_a_second_delivery_apart() -> None:
    sink = CountingSink()
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add()
    attribute = spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "svc"
    for number in (1, 2):
        spans.scope_spans.add().spans.add(span_id=bytes([number]) * 8, name="s")
    body = request.SerializeToString()
    parsed = urlparse(sink.url)
    for _ in range(2):  # the same request twice: two spans, each delivered twice
        connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
        connection.request("POST", "/v1/traces", body=body)
        assert connection.getresponse().status == 200
        connection.close()
    deadline = time.monotonic() + 10
    while sink.counts("svc") != (2, 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sink.counts("svc") == (2, 2) and sink.counts("other") == (0, 0)
    assert sink.errors == []
    sink.close()


def test_the_report_adds_up_each_scenario_and_says_the_rate_target() -> None:
    row = {
        "name": "500",
        "written": 100,
        "delivered": 90,
        "twice": 3,
        "lost": 1,
        "dropped": 4,
        "failed": 5,
        "unaccounted": 0,
    }
    result = {
        "rate": 20,
        "rates": {"file": {"per_s": 1000.0}, "collector": {"per_s": 700.0}},
        "scenarios": [row],
        "rss": [(0.0, 40 * 1024, "500"), (1.0, 50 * 1024, "500")],
    }
    text = collector_load.report(result, "here")
    assert "0.70x; target at least 0.8x: missed" in text
    line = next(line for line in text.splitlines() if line.startswith("500 "))
    assert line.split() == ["500", "100", "90", "10", "3", "0", "50"]
    assert "peak 50 MiB" in text


def test_a_reader_s_delivery_line_is_read_back_with_its_sign() -> None:
    text = (
        "otel-userevents: delivery: 1000 written + 5 taken over from exited readers' spools = "
        "990 delivered + 6 dropped (output: queue full (oldest dropped)) + 4 left in the spool "
        "- 2 unaccounted (counted twice)\n"
        "otel-userevents: stopped (SIGTERM): 1000 records in 3.0 s (333/s), lost 7, ..."
    )
    assert collector_load.ledger_of(text) == {
        "written": 1000,
        "delivered": 990,
        "dropped (output: queue full (oldest dropped))": 6,
        "left in the spool": 4,
        "unaccounted (counted twice)": -2,
        "kernel lost": 7,
    }


def test_what_readers_counted_is_summed_per_health_file_since_the_first_look() -> None:
    before = {"a": {"lost": 1, "dropped": 2, "failed": 3}}
    after = {  # A killed (its last counts kept), B started since
        "a": {"lost": 1, "dropped": 5, "failed": 3},
        "b": {"lost": 4, "dropped": 0, "failed": 1},
    }
    assert collector_load.counted_since(before, after) == {"lost": 4, "dropped": 3, "failed": 1}
