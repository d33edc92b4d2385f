# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record --kernel sched,syscalls``: each span carries what the kernel did for its thread,
checked against the kernel's own accounting read by the app itself inside the span (thread
CPU time, ``schedstat`` run-queue wait, ``status`` context switches) and against syscall
tracepoints counted in an instance of the test's own: never against wall-clock sleeps.

The app (tests/support/kernel_work_app.py) starts after the reader, registers its own
tracepoints and is found by its announcement, as a new service is on a host. Bounds: the
kernel view covers the whole span, the app's reads a window inside it, so the view may hold
up to ``gap_ns`` more of anything (the span's time outside the window), and ``SLACK_NS`` for
the clocks (the reader checks its mapping at start: every marker inside its window).
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import reader_process as proc
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

READS = 100
SLACK_NS = 500_000
"""Clock mapping and the reads' own edges (the emulated guest's clock reads take ~50 µs)."""
SLACK_SHARE = 50
"""And 1/50 of the span: in the emulated guest, with the host busy, the scheduler's own
accounting (thread CPU clock, ``schedstat``) and the trace clock's switch times were seen to
split a 205 ms sleep differently by 2.2 ms (on-CPU 8.6 ms by the switches, 2.3 ms by the CPU
clock plus at most 4.2 ms outside the app's reads)."""


def _switch_bound(gap_ns: int) -> int:
    """Switches the span may hold beyond the app's window: one per 0.5 ms of gap, plus 2."""
    return 2 + gap_ns // 500_000


def _value(value: dict[str, Any]) -> Any:
    kind, inner = next(iter(value.items()))
    if kind == "intValue":
        return int(inner)
    if kind == "arrayValue":
        return [_value(v) for v in inner.get("values", [])]
    return inner


def _attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {a["key"]: _value(a["value"]) for a in items}


@pytest.fixture
def syscall_counter(tracefs):
    """An instance of the test's own counting ``pread64`` entries: the kernel's count."""
    name = f"test-pread-{os.getpid()}"
    root = Path(tracefs.path) / "instances" / name
    root.mkdir()
    (root / "trace_clock").write_text("tai")  # what ``trace`` prints: seconds, to the µs
    (root / "events/syscalls/sys_enter_pread64/enable").write_text("1")
    yield root
    (root / "events/syscalls/sys_enter_pread64/enable").write_text("0")
    root.rmdir()


def test_each_span_shows_what_the_kernel_did_for_its_thread(tmp_path, syscall_counter):
    reader, output = proc.reader(tmp_path, "--prefix", "*", "--kernel", "sched,syscalls")
    app = subprocess.run(
        [sys.executable, "-m", "tests.support.kernel_work_app", "kview", str(READS)],
        capture_output=True, text=True, cwd=proc.ROOT, timeout=300,
    )  # fmt: skip
    assert app.returncode == 0, app.stderr
    measured = json.loads(app.stdout)
    names = ("spin", "sleep", "lock", "reads", "thread a", "thread b")
    assert proc.wait_until(lambda: _span_count(output) >= len(names) + 1, 60)
    err = proc.stop(reader)
    assert "16 of 16 clock checks within" in err, err

    clocksource = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    why = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()
    why = [line for line in why if "tsc" in line.lower() or "clocksource" in line]
    assert "jiffies" not in clocksource.read_text(), ("the clock ticks in jiffies", why)
    spans = {}
    for request in proc.requests(output)[0]:
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    if span["spanId"] in {m["span_id"] for m in measured.values()
                                          if isinstance(m, dict)}:  # fmt: skip
                        spans[span["name"]] = span
    assert set(spans) == set(names), sorted(spans)

    for name in names:
        got, want = _attributes(spans[name]["attributes"]), measured[name]
        gap = want["gap_ns"]
        where = f"{name}: {json.dumps(got)} against {json.dumps(want)}"
        assert got["linux.kernel.view"] == "whole", where
        assert got["thread.id"] == want["tid"], where
        duration = int(spans[name]["endTimeUnixNano"]) - int(spans[name]["startTimeUnixNano"])
        slack = SLACK_NS + duration // SLACK_SHARE
        assert got["linux.sched.on_cpu_ns"] + got["linux.sched.off_cpu_ns"] == duration, where
        assert want["cpu_ns"] - slack <= got["linux.sched.on_cpu_ns"], where
        assert got["linux.sched.on_cpu_ns"] <= want["cpu_ns"] + gap + slack, where
        runnable = got["linux.sched.runnable_ns"]
        assert want["run_delay_ns"] - slack <= runnable, where
        assert runnable <= want["run_delay_ns"] + gap + slack, where
        for kind in ("voluntary", "involuntary"):
            switches = got[f"linux.sched.switches.{kind}"]
            assert want[kind] <= switches <= want[kind] + _switch_bound(gap), where
        # Off the CPU, not waiting for it: asleep (or blocked), as the kernel's own
        # accounting leaves it: the window less its CPU time and its run-queue wait.
        asleep = got["linux.sched.sleeping_ns"] + got["linux.sched.blocked_ns"]
        window_asleep = want["window_ns"] - want["cpu_ns"] - want["run_delay_ns"]
        assert window_asleep - 2 * slack <= asleep <= window_asleep + gap + 2 * slack, where

    def waits(name: str) -> list[dict[str, Any]]:
        return [_attributes(e["attributes"]) for e in spans[name].get("events", [])
                if e["name"] == "linux.sched.off_cpu"]  # fmt: skip

    # The spin ran on the CPU: what it was off it for, it waited for the CPU.
    spin = _attributes(spans["spin"]["attributes"])
    assert spin["linux.sched.sleeping_ns"] <= measured["spin"]["gap_ns"] + SLACK_NS
    # The sleep slept in clock_nanosleep.
    sleep = waits("sleep")
    assert any(w["linux.sched.state"] == "sleeping" and w.get("linux.syscall.name") ==
               "clock_nanosleep" for w in sleep), sleep  # fmt: skip
    # The lock: asleep in futex until the holder let go, and woken by it.
    lock = waits("lock")
    assert any(w["linux.sched.state"] == "sleeping" and w.get("linux.syscall.name") == "futex"
               and w.get("linux.sched.waker.tid") == measured["holder_tid"]
               for w in lock), (lock, measured["holder_tid"])  # fmt: skip
    assert "futex" in _attributes(spans["lock"]["attributes"])["linux.syscall.top.name"]
    # N preads, as the kernel's own syscall tracepoint counted them in another instance.
    reads = _attributes(spans["reads"]["attributes"])
    top = dict(zip(reads["linux.syscall.top.name"], reads["linux.syscall.top.count"], strict=True))
    tai = round((time.clock_gettime_ns(time.CLOCK_TAI) - time.time_ns()) / 1e9)
    start_us = int(spans["reads"]["startTimeUnixNano"]) // 1000 + tai * 1_000_000
    end_us = -(-int(spans["reads"]["endTimeUnixNano"]) // 1000) + tai * 1_000_000
    counted = 0
    for line in (syscall_counter / "trace").read_text().splitlines():
        match = re.search(r"-(\d+)\s+\[\d+\] \S+ (\d+)\.(\d{6}): sys_pread64\(", line)
        if match and int(match[1]) == measured["reads"]["tid"]:
            counted += start_us <= int(match[2]) * 1_000_000 + int(match[3]) <= end_us
    assert top.get("pread64") == READS == counted, (top, counted)
    # Two threads at once: each span has its own thread, and its own figures.
    assert spans["thread a"]["attributes"] != spans["thread b"]["attributes"]
    assert measured["thread a"]["tid"] != measured["thread b"]["tid"]


def _span_count(output: Path) -> int:
    """Spans in the complete lines written so far (the reader may be mid-line)."""
    if not output.exists():
        return 0
    lines = output.read_text().split("\n")[:-1]
    spans = [json.loads(line) for line in lines if "resourceSpans" in line]
    return len(flatten(spans, "spans"))


def test_set_event_pid_hides_user_events_of_unlisted_processes_too(data, event_name, attach):
    """Why the kernel view has an instance of its own: in the reader's instance, a pid list
    would hide a new service's records until it is listed. And why the list is written
    without a seek: Python's append mode seeks to the end, which tracefs refuses."""
    registration = data.register(f"{event_name} u32 n")
    attach(registration)
    pids = Path(attach.tracefs.path) / "instances" / attach.instance / "set_event_pid"
    with pytest.raises(OSError):
        with open(pids, "a") as f:
            f.write("1")
    attach.tracefs.add_event_pids(attach.instance, [1])  # init only: not this process
    assert pids.read_text().split() == ["1"]
    registration.write(struct.pack("<I", 1))
    attach.tracefs.add_event_pids(attach.instance, [os.getpid()])  # added, not replaced
    assert sorted(pids.read_text().split(), key=int) == ["1", str(os.getpid())]
    registration.write(struct.pack("<I", 2))
    assert [line.split("n=")[1] for line in attach.lines(registration)] == ["0x2 (2)"]
    os.close(os.open(pids, os.O_WRONLY | os.O_TRUNC))
