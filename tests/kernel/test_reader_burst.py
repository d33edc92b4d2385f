# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A busy service while the reader records, live: two writers (tests/support/
burst_writer.py) write spans as fast as they can at once. Every record the writers wrote
is either in the reader's output, exactly as the writer's SDK saw it, or counted lost by
the kernel and said in the summary: nothing is lost silently, nothing made up. The second
case gives the reader a buffer too small for the burst, so that the kernel must drop
records and the count of the loss is proven against what was written. (How fast a writer
may go with nothing lost is the benchmark's, benchmarks/reader_live.py: never a timed
assertion here.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.support import reader_process as proc
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

SPANS_PER_WRITER = 1500


def _writer(prefix: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.burst_writer", prefix, str(SPANS_PER_WRITER),
         "0", "--own"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=proc.ROOT,
    )  # fmt: skip


def _settled(output, quiet: float = 3.0, timeout: float = 300.0) -> bool:
    """True once the output stopped growing for ``quiet`` seconds (the reader has drained
    its buffers and waited out its resource wait)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = proc.items(output)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return True
        time.sleep(0.25)
    return False


@pytest.mark.parametrize("buffer_kb", [None, 16], ids=["default-buffer", "16-KiB-buffer"])
def test_a_burst_is_recorded_exactly_or_counted_lost(tracefs, prefix, tmp_path, buffer_kb):
    size = ["--buffer-size-kb", str(buffer_kb)] if buffer_kb else []
    reader, output = proc.reader(tmp_path, "--prefix", prefix, *size)
    if buffer_kb == 16:  # the burst must overflow 16 KiB, however fast the reader is
        os.kill(reader.pid, signal.SIGSTOP)
    writers = [_writer(prefix) for _ in range(2)]
    results = []
    try:
        for writer in writers:
            out, err = writer.communicate(timeout=600)
            assert writer.returncode == 0, err
            results.append(json.loads(out))
    finally:
        os.kill(reader.pid, signal.SIGCONT)
    assert _settled(output)
    err = proc.stop(reader)

    written = sum(r["stats"]["written"] for r in results)  # spans and resource records
    assert all(r["stats"]["written"] >= SPANS_PER_WRITER for r in results), results
    summary = re.search(r"(\d+) records in .*?, lost (\d+)", err)
    assert summary, err
    read, lost = int(summary[1]), int(summary[2])
    assert read + lost == written, err
    want = flatten([r["own"] for r in results], "spans")
    got = flatten(proc.requests(output)[0], "spans")
    assert set(got) <= set(want)
    # A span whose resource record was lost waits, then goes out with no resource,
    # counted: every other part of it is still the writer's own.
    orphans = 0
    for key, text in got.items():
        if text != want[key]:
            mine, theirs = json.loads(text), json.loads(want[key])
            assert mine["resource"] == {} and mine["item"] == theirs["item"], text
            assert mine["scope"] == theirs["scope"]
            orphans += 1
    counted = re.search(r"(\d+) without resource", err)
    assert orphans == (int(counted[1]) if counted else 0), err
    if lost == 0:
        assert got == want
    else:
        assert len(got) >= SPANS_PER_WRITER * 2 - lost, "each lost record is one span at most"
    if buffer_kb == 16:
        assert lost > 0, "a 16 KiB buffer was meant to overflow"
        assert "behind its writers" in err
