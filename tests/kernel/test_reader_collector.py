# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A real collector downstream: a machine-wide reader (``--prefix '*'``) sends OTLP/HTTP
protobuf (or OTLP/gRPC: ``--exporter otlp_proto_grpc``) to rotel (an OpenTelemetry
collector, ``rotel-agent`` of the ``rotel`` wheel), whose own OTLP exporter posts to a sink
in this test; every span, log and metric point
several apps wrote arrives at the sink equal to the apps' own OTLP encoding, each with its
resource and scope (the collector may regroup them), with and without gzip between the
reader and the collector; and with ``--spool``, nothing is lost when the collector is down
for a minute while apps write, nor when the reader is SIGKILLed during the outage.

rotel is a test requirement (.ci/run installs it): where it is missing the test fails and
says so, it does not skip."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import reader_process as proc
from tests.support.collector import MESSAGES
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten, metric_points

pytestmark = pytest.mark.kernel

APPS = 3


def _metric_app(prefix: str, service: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.metric_app", prefix, service],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=proc.ROOT,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("exporter", "compression"),
    [
        ("otlp_proto_http", "none"),
        ("otlp_proto_http", "gzip"),
        ("otlp_proto_grpc", "none"),
        ("otlp_proto_grpc", "gzip"),
    ],
)
def test_every_record_reaches_a_real_collectors_exporter_as_the_apps_encoded_it(
    prefix, tmp_path, monkeypatch, sink, collector, exporter, compression
):
    url = collector.grpc_url if exporter == "otlp_proto_grpc" else collector.url
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    if compression != "none":  # the gRPC exporter takes gzip or nothing
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
    reader, _ = proc.reader(tmp_path, "--prefix", "*", "--exporter", exporter)
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
    assert arrived_in_time, (err, {p: len(sink.got(p)) for p in MESSAGES})
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
    for segment in spool.glob("**/*.seg"):
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
    assert {stat.S_IMODE(f.stat().st_mode) for f in spool.glob("**/*.seg")} == {0o600}

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
    assert list(spool.glob("**/*.seg")) == [], err
    resent = r"\d+ spans(?:,| and) \d+ logs(?: and \d+ metric points)? re-sent from the spool"
    assert re.search(resent, err), err  # the reader's own metrics too, if it sent them
    assert "not delivered" not in err and "not written" not in err, err
    print(f"outage {came_back - down:.0f} s; the spool sent {resent_in:.0f} s after")
