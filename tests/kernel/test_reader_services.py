# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader as an operator runs it: started before the apps, it gets a short job's records
from the first one; it records several services at once, or every service; and what it
holds goes away with it. Nothing here registers the apps' tracepoints: the apps and the
reader do, as in production."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.abi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.record.tracepoints import parse_tracepoint
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parent.parent.parent


_RUNNING: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_reader_outlives_its_test():
    """A failed test must not leave a reader (and its instance) to the tests after it."""
    yield
    while _RUNNING:
        process = _RUNNING.pop()
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()


def _reader(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    """``otel-userevents record ARGS -o FILE``, once it says it is ready."""
    number = len(_RUNNING)
    ready, output = tmp_path / f"ready-{number}", tmp_path / f"out-{number}"
    process = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--ready-file", str(ready), "-o", str(output), "--resource-wait", "2", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    _RUNNING.append(process)
    assert wait_until(lambda: ready.exists() and bool(ready.read_text()), 60), process.stderr
    return process, output


def _app(prefix: str, service: str, *flags: str) -> subprocess.Popen[str]:
    """The short job, in a process of its own that registers its own tracepoints."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.short_app", prefix, service, *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip


def _finished(app: subprocess.Popen[str]) -> dict:
    out, err = app.communicate(timeout=120)
    assert app.returncode == 0, err
    return json.loads(out)


def _stop(reader: subprocess.Popen[str]) -> str:
    reader.send_signal(signal.SIGINT)
    _, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    return err


def _requests(output: Path) -> tuple[list[dict], list[dict]]:
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    return [x for x in lines if "resourceSpans" in x], [x for x in lines if "resourceLogs" in x]


def _items(output: Path) -> int:
    """Spans and logs written to the OTLP/JSON output so far (whatever the batching)."""
    spans, logs = _requests(output) if output.exists() else ([], [])
    return len(flatten(spans, "spans")) + len(flatten(logs, "logs"))


def _tracepoints(tracefs, prefix: str) -> list[str]:
    return [
        f"{system}/{name}"
        for system in (USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM)
        for name in tracefs.events(system)
        if (parsed := parse_tracepoint(name)) is not None and parsed.prefix == prefix
    ]


def test_a_reader_started_first_gets_a_short_jobs_records_from_the_first(tracefs, prefix, tmp_path):
    assert _tracepoints(tracefs, prefix) == []  # nobody registered them
    reader, output = _reader(tmp_path, "--prefix", prefix)
    result = _finished(_app(prefix, "nightly-job"))  # writes at once and exits
    assert wait_until(lambda: _items(output) >= 13, 30), output.read_text()
    err = _stop(reader)

    got_spans, got_logs = _requests(output)
    want_spans, want_logs = flatten([result["spans"]], "spans"), flatten([result["logs"]], "logs")
    assert len(want_spans) == 6 and len(want_logs) == 7
    assert flatten(got_spans, "spans") == want_spans  # every span, with its resource
    assert flatten(got_logs, "logs") == want_logs
    assert "lost 0" in err and "without resource" not in err
    assert "from nightly-job (13)" in err


def test_one_reader_records_several_services_and_says_which_each_came_from(
    tracefs, prefix, tmp_path
):
    checkout, billing = f"{prefix}c", f"{prefix}b"
    reader, output = _reader(tmp_path, "--prefix", checkout, "--prefix", billing)
    tree, tree_output = _reader(
        tmp_path, "--prefix", checkout, "--prefix", billing, "--format", "tree"
    )
    results = [_finished(_app(checkout, "checkout")), _finished(_app(billing, "billing"))]
    assert wait_until(lambda: _items(output) >= 26, 30), output.read_text()
    assert wait_until(lambda: tree_output.read_text().count("trace ") >= 2, 30)
    err = _stop(reader)
    _stop(tree)

    got_spans, got_logs = _requests(output)
    want_spans = flatten([r["spans"] for r in results], "spans")
    assert len(want_spans) == 12 and flatten(got_spans, "spans") == want_spans
    assert flatten(got_logs, "logs") == flatten([r["logs"] for r in results], "logs")
    assert "from billing (13), checkout (13)" in err
    text = tree_output.read_text()
    trace_lines = [line for line in text.splitlines() if line.startswith("trace ")]
    assert sorted(line.split()[-1] for line in trace_lines) == ["billing", "checkout"]


def test_every_prefix_whose_tracepoints_match_our_schemas(tracefs, prefix, tmp_path, data):
    """``--prefix '*'``: services that appear while it runs are recorded from its next
    rescan (a service waits until it is listened to, as a long-running one would be), and a
    tracepoint with one of our names but another format is left alone."""
    data.register(f"{prefix}x_span u32 not_ours", 0)  # our name shape, a foreign format
    reader, output = _reader(tmp_path, "--prefix", "*", "--rescan-interval", "0.2")
    apps = [_app(f"{prefix}{n}", f"service-{n}", "--wait-listened") for n in range(2)]
    results = [_finished(app) for app in apps]
    mine = [f"{prefix}{n}" for n in range(2)]
    assert wait_until(
        lambda: sum(f'"service-{n}"' in output.read_text() for n in range(2)) == 2, 30
    ), (mine, output.read_text()[-2000:])
    assert wait_until(lambda: _items(output) >= 26, 30), output.read_text()[-3000:]
    err = _stop(reader)

    got_spans, _ = _requests(output)
    mine = {k: v for k, v in flatten(got_spans, "spans").items() if "service-" in v}
    assert mine == flatten([r["spans"] for r in results], "spans")
    assert f"not recording {prefix}x_span" in err
    assert "service-0 (13)" in err and "service-1 (13)" in err


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_what_the_reader_held_goes_away_with_it(tracefs, prefix, tmp_path, how):
    reader, _ = _reader(tmp_path, "--prefix", prefix)
    assert len(_tracepoints(tracefs, prefix)) >= 12  # span, resource, logs, metrics
    if how == "SIGINT":
        _stop(reader)
    else:
        reader.kill()
        reader.communicate(timeout=60)
        # The kernel closed its file, so its registrations are gone; the instance it left
        # still listens, until the next reader removes it at start.
        _stop(_reader(tmp_path, "--prefix", f"{prefix}other")[0])
    # The kernel deletes each tracepoint once its last user is gone.
    assert wait_until(lambda: _tracepoints(tracefs, prefix) == [], 30)
