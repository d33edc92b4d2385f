# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Delivery the way the Collector's exporters deliver (issue 44), through a real collector
(rotel, exporting to a sink in this test), with the real figures of the issue:

- a rolling update: a second reader started on the same ``--spool`` while the first holds
  an outage's backlog, then the first stopped: every record arrives, twice only what both
  readers recorded while they overlapped (each copy a reader's own), none lost;
- without ``--spool``, a 90-s outage while apps keep writing loses nothing (the default
  ``retry_on_failure``: 300 s);
- a collector answering 429 with ``Retry-After: 20`` (a front that says so to the first
  request, then passes requests to rotel) is not asked again sooner, and loses nothing.

rotel is a test requirement (.ci/run installs it): where it is missing the test fails."""

from __future__ import annotations

import http.client
import http.server
import json
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support import reader_process as proc
from tests.support.collector import Sink
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

KINDS = (("spans", "/v1/traces"), ("logs", "/v1/logs"))
NO_HEALTH = ("--health-interval", "0")
"""The reader's own metrics left out: these tests count the apps' spans and logs."""
OUTAGE = 90.0
"""Seconds the collector is down in the outage without a spool (the issue's figure)."""
RETRY_AFTER = 20
"""Seconds the throttling collector asks for (the issue's figure)."""


def _copies(sink: Sink, kind: str, path: str) -> Counter[str]:
    """How many times each span or log arrived at the sink (every copy counted: two
    readers' copies of one record may come in one request of the collector's), keyed as
    :func:`tests.support.otlp.flatten` keys them."""
    resources_key, scopes_key, items_key = {
        "spans": ("resourceSpans", "scopeSpans", "spans"),
        "logs": ("resourceLogs", "scopeLogs", "logRecords"),
    }[kind]
    copies: Counter[str] = Counter()
    for request in sink.got(path):
        for resource in request.get(resources_key, ()):
            for scope in resource.get(scopes_key, ()):
                for item in scope.get(items_key, ()):
                    key = item.get("spanId", "") + item.get("observedTimeUnixNano", "")
                    copies[key + json.dumps(item.get("body"), sort_keys=True)] += 1
    return copies


def _recorded(err: str, service: str) -> int:
    """Spans and logs of ``service`` a reader's summary says it rebuilt."""
    found = re.search(rf"{re.escape(service)} \((\d+)\)", err)
    return int(found[1]) if found else 0


def _want(results: list[dict[str, Any]], kind: str) -> dict[str, str]:
    return flatten([r[kind] for r in results], kind)


def _all_arrived(sink: Sink, results: list[dict[str, Any]]) -> bool:
    return all(set(_want(results, kind)) <= set(_copies(sink, kind, path)) for kind, path in KINDS)


def _clean(err: str) -> None:
    """The summary counts nothing lost: nothing failed, dropped or not delivered."""
    summary = next(line for line in err.splitlines() if "stopped (" in line)
    for lost in ("not written", "dropped", "not delivered"):
        assert lost not in summary, summary


class ThrottlingFront:
    """An OTLP/HTTP front of rotel on 127.0.0.1: answers the first request 429 with
    ``Retry-After``, passes the others to rotel; keeps when each request arrived."""

    def __init__(self, target: str, retry_after: int) -> None:
        self.arrivals: list[float] = []
        self.lock = threading.Lock()
        front = self
        parts = urlsplit(target)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with front.lock:
                    front.arrivals.append(time.monotonic())
                    first = len(front.arrivals) == 1
                if first:
                    self.send_response(429)
                    self.send_header("Retry-After", str(retry_after))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() in ("content-type", "content-encoding")
                }
                connection.request("POST", self.path, body, headers)
                answer = connection.getresponse()
                data = answer.read()
                connection.close()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_429_retry_after_20_is_not_asked_again_sooner_and_loses_nothing(
    prefix, tmp_path, monkeypatch, sink, collector
):
    front = ThrottlingFront(collector.url, RETRY_AFTER)
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", front.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")  # shorter than the delay
        reader, _ = proc.reader(
            tmp_path, "--prefix", "*", "--exporter", "otlp_proto_http", *NO_HEALTH
        )
        results = [proc.finished(proc.app(f"{prefix}t{n}", f"{prefix}-throttled-{n}"))
                   for n in range(2)]  # fmt: skip
        arrived = wait_until(lambda: _all_arrived(sink, results), 180)
        err = proc.stop(reader)
    finally:
        front.close()
    assert arrived, err
    arrivals = front.arrivals
    assert len(arrivals) >= 2 and arrivals[1] - arrivals[0] >= RETRY_AFTER, arrivals
    for kind, path in KINDS:
        assert set(_copies(sink, kind, path)) >= set(_want(results, kind))
    _clean(err)
    print(f"asked again {arrivals[1] - arrivals[0]:.1f} s after the 429")


def test_a_90_s_outage_without_a_spool_loses_nothing(
    prefix, tmp_path, monkeypatch, sink, collector
):
    """The collector killed for 90 s while apps keep writing (one every 15 s), then back:
    every span and log arrives, with the reader's defaults (no flag about delivery)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    reader, _ = proc.reader(tmp_path, "--prefix", "*", "--exporter", "otlp_proto_http")
    results = [proc.finished(proc.app(f"{prefix}o0", f"{prefix}-outage-0"))]
    assert wait_until(lambda: _all_arrived(sink, results), 120)  # up: straight through
    collector.kill()
    down = time.monotonic()
    n = 1
    while time.monotonic() - down < OUTAGE - 15:
        results.append(proc.finished(proc.app(f"{prefix}o{n}", f"{prefix}-outage-{n}")))
        n += 1
        time.sleep(max(0.0, down + 15 * n - 15 - time.monotonic()))
    time.sleep(max(0.0, OUTAGE - (time.monotonic() - down)))
    collector.start()
    came_back = time.monotonic()
    arrived = wait_until(lambda: _all_arrived(sink, results), 240)
    delivered_in = time.monotonic() - came_back
    err = proc.stop(reader)
    assert arrived, err
    assert len(results) >= 5  # apps written during the outage
    _clean(err)
    print(f"outage {came_back - down:.0f} s, {len(results) - 1} apps written during it; "
          f"all delivered {delivered_in:.0f} s after")  # fmt: skip


def _spooled_records(spool: Path) -> int:
    """Spans and logs in the spool's segments (every namespace), from their headers."""
    total = 0
    for segment in spool.glob("**/*.seg"):
        try:
            with segment.open("rb") as file:
                header = file.read(24)
        except OSError:
            continue  # re-sent and deleted meanwhile
        if len(header) == 24 and header[:8] == b"OTUSPOOL" and header[9] in (1, 2):
            total += int.from_bytes(header[12:16], "little")
    return total


def test_a_rolling_update_on_one_spool_loses_nothing_and_sends_twice_only_what_both_read(
    prefix, tmp_path, monkeypatch, sink, collector
):
    """Reader A spools an outage's backlog; reader B starts on the same ``--spool`` (a
    DaemonSet's new pod); an app writes while both record it; A is stopped (its stop spools
    what it still held, and frees its lock); the collector comes back. Every record
    arrives: what only A recorded once, what both recorded once per reader that recorded
    it (each reader's summary says how many it rebuilt: B may miss an app's first records
    while A answered its announcement), none lost."""
    spool = tmp_path / "spool"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")  # spooled 2 s into the outage
    command = ("--prefix", "*", "--exporter", "otlp_proto_http", "--spool", str(spool),
               *NO_HEALTH)  # fmt: skip
    a, _ = proc.reader(tmp_path, *command)
    collector.kill()
    only_a = [proc.finished(proc.app(f"{prefix}a", f"{prefix}-only-a"))]
    assert wait_until(lambda: _spooled_records(spool) >= 13, 120), _spooled_records(spool)
    b, _ = proc.reader(tmp_path, *command)
    both = [proc.finished(proc.app(f"{prefix}b", f"{prefix}-both"))]
    assert wait_until(lambda: _spooled_records(spool) >= 13 * 2, 120), _spooled_records(spool)
    err_a = proc.stop(a)  # A's namespace (its backlog, and what it spooled at stop) left to B
    collector.start()
    arrived = wait_until(lambda: _all_arrived(sink, only_a + both), 240)
    drained = wait_until(lambda: not list(spool.glob("**/*.seg")), 240)  # B's and A's
    err_b = proc.stop(b)
    assert arrived and drained, (err_a, err_b)
    by_a, by_b = _recorded(err_a, f"{prefix}-both"), _recorded(err_b, f"{prefix}-both")
    assert _recorded(err_a, f"{prefix}-only-a") == 13 and by_a == 13, err_a
    assert 0 < by_b <= 13, err_b
    copies_of_both = 0
    for kind, path in KINDS:
        copies = _copies(sink, kind, path)
        assert {copies[key] for key in _want(only_a, kind)} == {1}, kind  # never twice
        assert {copies[key] for key in _want(both, kind)} <= {1, 2}, kind
        copies_of_both += sum(copies[key] for key in _want(both, kind))
    assert copies_of_both == by_a + by_b  # a copy for each reader that recorded a record
    assert list(spool.glob("**/*.seg")) == [], err_b
    assert re.search(r"\d+ spans and \d+ logs re-sent from the spool", err_b), err_b
    _clean(err_a)
    _clean(err_b)
    print(f"A rebuilt {by_a} of the app both read, B {by_b}; {copies_of_both} copies arrived")
