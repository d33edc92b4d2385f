# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record --workers``, live: a stop (Ctrl-C to the reader's process group, as a terminal
sends it) that comes while the workers are still starting (each an interpreter importing
the reader), with pages in the buffer that they will be handed, loses nothing. Every
record the writers wrote is in the output, exactly as the writer's SDK saw it, or counted
lost by the kernel; the reader exits 0 and reports no worker lost. (The group is frozen
while the workers start so that the stop lands then, whatever the guest's speed.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

SPANS_PER_WRITER = 1500
"""Spans per writer: with two writers, far more than the 64 pages of a read that starts
the workers."""
WORKERS = 4


def _writer(prefix: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.burst_writer", prefix, str(SPANS_PER_WRITER),
         "0", "--own"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=proc.ROOT,
    )  # fmt: skip


def _burst(prefix: str, results: list[dict]) -> None:
    writers = [_writer(prefix) for _ in range(2)]
    for writer in writers:
        out, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err
        results.append(json.loads(out))


def _stop_as_workers_start(
    reader: subprocess.Popen[str], ready: Path, prefix: str, results: list[dict]
) -> str:
    """A burst while the reader is stopped (its next read is busy: the workers start);
    the reader and its workers frozen as soon as they exist, still starting; a second
    burst; then Ctrl-C to the group, and the group resumed. Its stderr."""
    assert wait_until(lambda: ready.exists() and bool(ready.read_text()), 60), "not ready"
    os.kill(reader.pid, signal.SIGSTOP)
    try:
        _burst(prefix, results)
    finally:
        os.kill(reader.pid, signal.SIGCONT)
    assert wait_until(lambda: proc.worker_processes(reader.pid) == WORKERS, 120), (
        "the workers never started"
    )
    os.killpg(reader.pid, signal.SIGSTOP)  # each worker an interpreter importing the reader
    try:
        _burst(prefix, results)  # pages the workers will be handed
        os.killpg(reader.pid, signal.SIGINT)  # pending in each until it runs again
    finally:
        os.killpg(reader.pid, signal.SIGCONT)
    return reader.communicate(timeout=300)[1]


def test_a_stop_while_workers_start_loses_no_record(tracefs, prefix, tmp_path):
    ready, output = tmp_path / "ready", tmp_path / "out"
    reader = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--ready-file", str(ready), "-o", str(output), "--resource-wait", "2",
         "--prefix", prefix, "--workers", str(WORKERS)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=proc.ROOT,
        start_new_session=True,  # a process group of its own: the reader and its workers
    )  # fmt: skip
    results: list[dict] = []
    try:
        err = _stop_as_workers_start(reader, ready, prefix, results)
    finally:
        if reader.poll() is None:  # the test failed first: no reader outlives it
            os.killpg(reader.pid, signal.SIGKILL)
            reader.communicate()

    assert reader.returncode == 0, err
    assert "decoding worker" not in err, err
    assert "stopped (interrupted)" in err, err
    written = sum(r["stats"]["written"] for r in results)  # spans and resource records
    summary = re.search(r"(\d+) records in .*?, lost (\d+)", err)
    assert summary, err
    read, lost = int(summary[1]), int(summary[2])
    assert read + lost == written, err
    want = flatten([r["own"] for r in results], "spans")
    got = flatten(proc.requests(output)[0], "spans")
    if lost == 0:
        assert got == want
    else:  # a span whose resource record was lost goes out without it (counted)
        assert set(got) <= set(want)
        assert len(got) >= SPANS_PER_WRITER * 4 - lost, "each lost record is one span at most"
