# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The live reader as an operator runs it on a busy machine: ``record --prefix '*'
--workers 2``, a busy service whose reads keep the workers at work, and new apps started
one after another while it runs, each with a fresh prefix (nothing registers their
tracepoints before they start: a gap in how the reader finds them would show).

Each app's first record (it writes one span and one log) must be in the output, and the
busy service's spans exactly as its own SDK saw them (the live reader is frozen once while
the busy service writes, so that its next read is big enough to start the workers).

Whether ``--workers 2`` writes what ``--workers 1`` would: the same writers cannot be
replayed, so a second reader records the same run with ``record --capture``, and ``decode
--workers 1`` and ``decode --workers 2`` of that trace.dat (its workers used even for so
small a capture) must give the same spans and logs, compared item by item whatever the
batching: both read the same pages, so a difference is the workers'. The live output must
hold the same spans as the capture (by span id: the live reader adds what it finds in
``/proc``, which a capture cannot).

With 10,000 other user_events names on the host, every app's announcement is still
answered within its wait (the exporter says whether it gave up): the rescan lists those
names at most 5% of the time, on a thread of its own (``live/rescan_schedule.py``)."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.reader.pipeline.decode_stage import BUSY_PAGES
from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

APPS = 3
BUSY_SPANS = 1500
"""Spans of the busy service, written as fast as it can: more pages than a read needs to
start the workers (:data:`.BUSY_PAGES`; 800 single-format spans were too few), after which
every read goes through them."""
OTHER_NAMES = 10_000
DECODE = (
    "import sys\n"
    "from opentelemetry_exporter_userevents.reader.cli import main\n"
    "from opentelemetry_exporter_userevents.reader.pipeline import decode_stage\n"
    "decode_stage.WORKERS_FROM = 0\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
"""``otel-userevents`` whose ``decode`` hands even this small capture to its workers (below
4 MiB it decodes in-process whatever ``--workers`` says: a few seconds of writing in the
emulated guest is far less)."""
BUFFER_KB = "8192"
"""Per CPU, for each reader: nothing is lost while a reader is frozen or the guest slow."""


def _started(ready: Path) -> bool:
    return ready.exists() and bool(ready.read_text())


def _reader(tmp_path: Path, name: str, *args: str) -> subprocess.Popen[str]:
    ready = tmp_path / f"ready-{name}"
    process = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--ready-file", str(ready), "--resource-wait", "2", "--prefix", "*",
         "--buffer-size-kb", BUFFER_KB, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=proc.ROOT,
    )  # fmt: skip
    proc._RUNNING.append(process)  # reaped after the test if it fails
    return process


def _unread_bytes(tracefs: Tracefs, reader_pid: int) -> int:
    """Bytes waiting in the live reader's own instance, every CPU."""
    total = 0
    for instance in glob.glob(
        os.path.join(tracefs.path, "instances", f"otel-userevents.{reader_pid}.*")
    ):
        name = os.path.basename(instance)
        for cpu in tracefs.cpus(name):
            total += tracefs.cpu_stats(name, cpu).get("bytes", 0)
    return total


def _app(prefix: str, service: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.announcing_app", prefix, service],
        capture_output=True, text=True, cwd=proc.ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _summary(err: str) -> tuple[int, int]:
    found = re.search(r"(\d+) records in .*?, lost (\d+)", err)
    assert found, err
    return int(found[1]), int(found[2])


def _run(tracefs: Tracefs, tmp_path: Path, prefix: str, capture: bool) -> dict:
    """The readers, the busy service, the apps one after another; what each said."""
    live = _reader(tmp_path, "live", "--workers", "2", "-o", str(tmp_path / "live.json"))
    second = (
        _reader(tmp_path, "capture", "--capture", str(tmp_path / "trace.dat")) if capture else None
    )
    for name in ("live", "capture") if capture else ("live",):  # both start at once
        ready = tmp_path / f"ready-{name}"
        assert wait_until(lambda r=ready: _started(r), proc.READY_WITHIN), f"{name} not ready"
    busy = subprocess.Popen(
        [sys.executable, "-m", "tests.support.burst_writer", f"{prefix}busy", str(BUSY_SPANS),
         "0", "--own"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=proc.ROOT,
    )  # fmt: skip
    proc._RUNNING.append(busy)
    # Listened to (its records reach the output), then the live reader frozen until a
    # read's worth of pages waits for it: its next read starts the workers.
    assert wait_until(lambda: proc.items(tmp_path / "live.json") > 0, 120), "busy not heard"
    os.kill(live.pid, signal.SIGSTOP)
    try:
        wait_until(
            lambda: (
                busy.poll() is not None
                or _unread_bytes(tracefs, live.pid) > BUSY_PAGES * 4096 * 5 // 4
            ),
            60,
        )
    finally:
        os.kill(live.pid, signal.SIGCONT)
    apps = {f"{prefix}-app-{n}": _app(f"{prefix}a{n}", f"{prefix}-app-{n}") for n in range(APPS)}
    busy_out, busy_err = busy.communicate(timeout=600)
    assert busy.returncode == 0, busy_err
    workers = proc.worker_processes(live.pid)
    return {
        "apps": apps,
        "busy": json.loads(busy_out),
        "workers": workers,
        "live": proc.stop(live),
        "capture": proc.stop(second) if second is not None else None,
    }


@pytest.fixture
def other_names() -> Iterator[str]:
    """10,000 user_events names that are not ours, registered before the reader starts by a
    process of their own, and held until the test ends."""
    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.support.other_names", str(OTHER_NAMES)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=proc.ROOT,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.startswith("ready "), holder.stderr.read() if holder.stderr else line
        yield line.split()[1]
    finally:
        holder.communicate(input="", timeout=120)


def _check_live(tmp_path: Path, prefix: str, ran: dict) -> dict[str, str]:
    err = ran["live"]
    _, lost = _summary(err)
    assert lost == 0, err
    assert ran["workers"] == 2, f"the workers never started: {err}"
    assert "decoding worker" not in err and "undecodable" not in err, err
    spans, logs = proc.requests(tmp_path / "live.json")
    spans, logs = flatten(spans, "spans"), flatten(logs, "logs")
    for service, announced in ran["apps"].items():
        for exporter in ("span", "log"):  # answered within the writer's wait
            assert announced[exporter]["listened"], (service, announced)
            assert not announced[exporter]["gave_up"], (service, announced)
        assert sum(f'"{service}"' in text for text in spans.values()) == 1, (service, err)
        assert sum(f'"{service}"' in text for text in logs.values()) == 1, (service, err)
    busy = ran["busy"]
    assert busy["stats"].get("not_listened", 0) == 0, busy["stats"]
    want = flatten([busy["own"]], "spans")
    assert {key: spans[key] for key in want if key in spans} == want  # every span, exactly
    assert "may have lost their first records" not in err, err
    return spans


def test_workers_write_every_new_app_from_its_first_record_and_what_one_worker_would(
    tracefs, prefix, tmp_path
):
    ran = _run(tracefs, tmp_path, prefix, capture=True)
    live_spans = _check_live(tmp_path, prefix, ran)

    assert ", lost 0;" in ran["capture"], ran["capture"]
    decoded = {}
    for workers in ("1", "2"):
        out = tmp_path / f"decoded-{workers}.json"
        done = subprocess.run(
            [sys.executable, "-c", DECODE, "decode", "--workers", workers, "-o", str(out),
             str(tmp_path / "trace.dat")],
            capture_output=True, text=True, cwd=proc.ROOT, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        spans, logs = proc.requests(out)
        decoded[workers] = (flatten(spans, "spans"), flatten(logs, "logs"))
    assert decoded["2"] == decoded["1"]  # every span and log, whatever the batching
    ours = {key for key, text in decoded["1"][0].items() if prefix in text}
    assert ours == {key for key, text in live_spans.items() if prefix in text}


def test_with_ten_thousand_other_names_every_new_app_is_answered(
    tracefs, prefix, tmp_path, other_names
):
    ran = _run(tracefs, tmp_path, prefix, capture=False)
    _check_live(tmp_path, prefix, ran)
