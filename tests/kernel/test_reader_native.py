# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The native core, live: two readers started before any app (each in a tracefs instance
of its own, so each gets every record), one with the native core and two workers, one with
the Python path only (``OTEL_EXPORTER_USER_EVENTS_READER_CORE=python``). A short app
(spans and logs with every kind of value, escapes included, which the core hands back to
Python) and a busy one (enough pages for the workers) write; both readers rebuild exactly
what the apps' SDKs saw, the same spans and logs, and count the same."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

BURST = 1500


def _reader(tmp_path: Path, name: str, env: dict[str, str], *args: str) -> tuple:
    ready, output = tmp_path / f"ready-{name}", tmp_path / f"out-{name}"
    process = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--ready-file", str(ready), "-o", str(output), "--resource-wait", "2", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=proc.ROOT,
        env={**os.environ, **env},
    )  # fmt: skip
    proc._RUNNING.append(process)
    assert wait_until(lambda: ready.exists() and bool(ready.read_text()), proc.READY_WITHIN), (
        f"reader {name} never ready"
    )
    return process, output


def _items(output: Path) -> tuple[dict[str, str], dict[str, str]]:
    spans, logs = proc.requests(output)
    return flatten(spans, "spans"), flatten(logs, "logs")


def _counts(err: str) -> str:
    """The summary's counts, without its times, rates and the core's name."""
    summary = next(line for line in err.splitlines() if "stopped (" in line)
    summary = re.sub(r" in [0-9.]+ s \([^)]*\)", "", summary)
    return summary.rsplit(", ", 1)[0]


def test_the_native_core_and_the_python_path_rebuild_the_same_live(tracefs, prefix, tmp_path):
    native, native_out = _reader(tmp_path, "native", {}, "--prefix", prefix, "--workers", "2")
    python, python_out = _reader(
        tmp_path, "python", {"OTEL_EXPORTER_USER_EVENTS_READER_CORE": "python"}, "--prefix", prefix
    )
    short = proc.finished(proc.app(prefix, "native-short"))
    burst = subprocess.run(
        [sys.executable, "-m", "tests.support.burst_writer", prefix, str(BURST), "0", "--own"],
        capture_output=True, text=True, cwd=proc.ROOT, timeout=600,
    )  # fmt: skip
    assert burst.returncode == 0, burst.stderr
    want_spans = flatten([short["spans"], json.loads(burst.stdout)["own"]], "spans")
    want_logs = flatten([short["logs"]], "logs")
    expected = len(want_spans) + len(want_logs)
    for output in (native_out, python_out):
        assert wait_until(lambda o=output: proc.items(o) >= expected, 300), proc.items(output)
    native_err, python_err = proc.stop(native), proc.stop(python)

    assert native_err.rstrip().endswith(", native core"), native_err
    assert "Python core (OTEL_EXPORTER_USER_EVENTS_READER_CORE=python)" in python_err, python_err
    assert _counts(native_err) == _counts(python_err), (native_err, python_err)
    assert "lost 0" in native_err and "lost 0" in python_err, (native_err, python_err)
    spans, logs = _items(native_out)
    assert (spans, logs) == _items(python_out)
    assert spans == want_spans and logs == want_logs
