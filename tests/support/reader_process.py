# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Processes as operators run them, for kernel tests: ``otel-userevents`` commands and
short apps (tests/support/short_app.py), each reaped after its test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

ROOT = Path(__file__).resolve().parent.parent.parent


_RUNNING: list[subprocess.Popen[str]] = []
READY_WITHIN = 180
"""Seconds a reader may take to start: its imports took 96 s with three readers starting at
once in an emulated guest on a loaded host (a bound on the test, not a measure of the
reader)."""


@pytest.fixture(autouse=True)
def reap_processes():
    """A failed test must not leave a reader (and its instance) or a tool to the tests after
    it: each is interrupted (then killed) at teardown."""
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


def reader(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    """``otel-userevents record ARGS -o FILE``, once it says it is ready."""
    number = len(_RUNNING)
    ready, output = tmp_path / f"ready-{number}", tmp_path / f"out-{number}"
    process = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--ready-file", str(ready), "-o", str(output), "--resource-wait", "2", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    _RUNNING.append(process)
    if not wait_until(lambda: ready.exists() and bool(ready.read_text()), READY_WITHIN):
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"the reader said nothing of being ready in {READY_WITHIN} s: {err}")
    return process, output


def app(
    prefix: str, service: str, *flags: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """The short job, in a process of its own that registers its own tracepoints."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.short_app", prefix, service, *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def background(*command: str) -> subprocess.Popen[str]:
    """A tool that runs until interrupted (trace-cmd record, perf record), reaped after
    the test if it fails before :func:`stop`."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    _RUNNING.append(process)
    return process


def otel_userevents(*args: str) -> subprocess.CompletedProcess[str]:
    """``otel-userevents ARGS``, run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip


def finished(app: subprocess.Popen[str]) -> dict:
    out, err = app.communicate(timeout=120)
    assert app.returncode == 0, err
    return json.loads(out)


def stop(process: subprocess.Popen[str], codes: tuple[int, ...] = (0,)) -> str:
    """Ctrl-C, as an operator stops a recording; its stderr."""
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode in codes, err
    return err


READY_LINE_END = "; Ctrl-C or SIGTERM stops it"


def after_ready(err: str) -> str:
    """The reader's stderr after its first line, which says it listens (checked here)."""
    ready, _, rest = err.partition("\n")
    assert ready.startswith("otel-userevents: ") and ready.endswith(READY_LINE_END), err
    return rest


def written_lines(output: Path) -> list[dict]:
    """The OTLP/JSON lines a running reader has written whole: a line longer than the
    file's buffer reaches the file in parts, so the last one may not have ended yet."""
    text = output.read_text() if output.exists() else ""
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def requests(output: Path) -> tuple[list[dict], list[dict]]:
    lines = written_lines(output)
    return [x for x in lines if "resourceSpans" in x], [x for x in lines if "resourceLogs" in x]


def items(output: Path) -> int:
    """Spans and logs written to the OTLP/JSON output so far (whatever the batching)."""
    spans, logs = requests(output)
    return len(flatten(spans, "spans")) + len(flatten(logs, "logs"))


def worker_processes(parent: int) -> int:
    """How many decoding workers ``parent`` has (its resource tracker is not one)."""
    found = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"spawn_main" in command:
            found += 1
    return found
