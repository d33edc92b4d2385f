# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A machine-wide reader (``--prefix '*'``) exporting to a collector that refuses
connections or dribbles its answers keeps reading: short apps started one after the other
are each listened to within their announcement wait, and every record is delivered or
counted (failed, dropped, not delivered); stopped by SIGTERM under a dribbling collector,
it exits within its stop timeout and names what it could not deliver. Nothing here
registers the apps' tracepoints: they and the reader do, as in production."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.loopback import bring_loopback_up
from tests.support.raw_collector import RawServer

pytestmark = pytest.mark.kernel

APPS = 3
STOP_TIMEOUT = 5.0


@pytest.fixture(autouse=True)
def loopback_up() -> None:
    bring_loopback_up()


DRIBBLED = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000
"""What the dribbling collector answers, one byte every 0.2 s: each receive gets a byte in
time; only a deadline on the whole request ends it."""


@pytest.fixture
def dribbler() -> Iterator[RawServer]:
    """A collector on 127.0.0.1 that reads each request and dribbles its answer for ever."""

    def dribble(connection: socket.socket, _request: int) -> None:
        for byte in DRIBBLED:
            if server.stop.wait(0.2):
                return
            server.send(connection, bytes([byte]))

    server = RawServer(dribble)
    yield server
    server.close()


def _refusing_url() -> str:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: connections are refused
    return f"http://127.0.0.1:{port}"


def _counts(err: str) -> dict[str, int]:
    """From the summary: spans and logs rebuilt, and those failed, dropped and not
    delivered (every count of what did not reach the collector)."""
    summary = next(line for line in err.splitlines() if "stopped (" in line)
    rebuilt = re.search(r"(\d+) spans and (\d+) logs rebuilt", summary)
    assert rebuilt is not None, summary
    counts = {"rebuilt": int(rebuilt[1]) + int(rebuilt[2]), "failed": 0, "dropped": 0}
    counts["not delivered"] = 0
    for part in summary.split(", "):
        if part.endswith("not written (the output refused them)"):
            counts["failed"] = int(part.split()[0])
    for label, pattern in (
        ("dropped", r"((?:\d+ (?:spans|logs)(?:, | and )?)+) dropped \(output: "),
        ("not delivered", r"((?:\d+ (?:spans|logs)(?:, | and )?)+) not delivered: stop timeout"),
    ):
        for found in re.finditer(pattern, summary):
            counts[label] += sum(int(n) for n in re.findall(r"\d+", found[1]))
    return counts


def _apps_one_after_the_other(prefix: str) -> list[str]:
    """Short apps of new prefixes, each started when the one before has exited; each must
    have been listened to within its announcement wait."""
    services = []
    for n in range(APPS):
        service = f"{prefix}-out-{n}"
        app = proc.app(f"{prefix}o{n}", service)
        _, err = app.communicate(timeout=120)
        assert app.returncode == 0, err
        assert "did not listen" not in err, err  # it did not give up waiting
        services.append(service)
    return services


NO_HEALTH = ("--health-interval", "0")
"""The reader's own metrics, sent and counted like the apps' records, left out: these tests
count the apps' records (tests/reader/outputs/test_health_metrics.py has the reader's)."""


@pytest.mark.parametrize("collector", ["refusing", "dribbling"])
def test_a_stuck_collector_does_not_keep_the_reader_from_new_apps(
    prefix, tmp_path, monkeypatch, dribbler, collector
):
    url = _refusing_url() if collector == "refusing" else dribbler.url
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "10" if collector == "refusing" else "2")
    reader, _ = proc.reader(
        tmp_path, "--prefix", "*", "--exporter", "otlp_proto_http",
        "--stop-timeout", str(STOP_TIMEOUT), *NO_HEALTH,
    )  # fmt: skip
    services = _apps_one_after_the_other(prefix)
    if collector == "dribbling":
        assert wait_until(lambda: dribbler.requests >= 1, 60)  # the reader did post
    err = proc.stop(reader)

    for service in services:
        assert f"{service} (13)" in err, err
    assert "may have lost their first records" not in err, err  # no service was late
    counts = _counts(err)
    assert counts["rebuilt"] == 13 * APPS, err
    # nothing reached the collector: every record is counted as one of these, once
    assert counts["failed"] + counts["dropped"] + counts["not delivered"] == counts["rebuilt"]


@pytest.mark.parametrize("spool", [False, True], ids=["no spool", "spool"])
def test_sigterm_under_a_dribbling_collector_exits_within_the_stop_timeout(
    prefix, tmp_path, monkeypatch, dribbler, spool
):
    """Within the stop timeout; without a spool what was not delivered is counted, with
    one it is all on disk for the next reader (the request in flight too)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", dribbler.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "600")  # a request would wait for ever
    spooling = ("--spool", str(tmp_path / "spool")) if spool else ()
    reader, _ = proc.reader(
        tmp_path, "--prefix", "*", "--exporter", "otlp_proto_http",
        "--stop-timeout", str(STOP_TIMEOUT), *NO_HEALTH, *spooling,
    )  # fmt: skip
    _apps_one_after_the_other(prefix)
    assert wait_until(lambda: dribbler.requests >= 1, 60)  # a request is in flight
    reader.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    try:  # the stop timeout, and a generous margin for the rest of stopping under emulation
        _, err = reader.communicate(timeout=STOP_TIMEOUT + 10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {time.monotonic() - stopped:.0f} s after SIGTERM")
    assert reader.returncode == 0, err
    assert "stopped (SIGTERM)" in err, err
    counts = _counts(err)
    assert counts["rebuilt"] == 13 * APPS, err
    if not spool:
        assert re.search(r"\d+ spans(?: and \d+ logs)? not delivered: stop timeout", err), err
        assert counts["failed"] + counts["dropped"] + counts["not delivered"] == counts["rebuilt"]
        return
    summary = next(line for line in err.splitlines() if "stopped (" in line)
    spooled = re.search(r"(\d+) spans and (\d+) logs spooled \(", summary)
    assert spooled is not None, summary
    assert int(spooled[1]) + int(spooled[2]) == counts["rebuilt"], summary  # every one kept
    assert counts["failed"] + counts["dropped"] + counts["not delivered"] == 0, summary
    assert list((tmp_path / "spool").glob("**/*.seg")), "the segments stay for the next reader"
