# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Peak memory of ``otel-userevents record`` through a burst of spans, live, in the test bed.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_memory.py

It boots the test bed (``--memory-mb`` of guest memory) and, there, starts ``record
--prefix P -o /dev/null --progress`` (``--workers``, ``--buffer-size-kb``), then
``--writers`` processes of ``benchmarks/burst_encoded.py`` that write ``--spans`` spans
between them as fast as they can, writer n pinned to CPU n so that each CPU's buffer takes
its share (records of the benchmark's shape encoded once by the exporter's encoder, each
with its own ids: the emulated guest's SDK writes about 800 spans/s, which would make a
million-span burst take 20 minutes). Once every span is rebuilt or counted lost (or
nothing moved for ``STALL`` s, or ``--deadline``), it reads the peak resident size of the
reader and its workers (``VmHWM`` of each, summed: an upper bound of their peak together)
and the largest sum of their ``VmRSS`` seen while polling, stops the reader and reads its
summary: spans rebuilt, records lost (counted by the kernel when the reader fell behind).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.guest_run import save_result  # noqa: E402
from testbed import guest  # noqa: E402

GOAL_MIB = 200
PREFIX = "membench"
STALL = 120
"""Seconds without a new span rebuilt after which the reader is taken as done."""


def status(pid: int, field: str) -> int:
    """``field`` (``VmHWM``, ``VmRSS``) of ``pid`` in KiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration, ValueError):
        return 0


def family(pid: int) -> list[int]:
    """``pid`` and its descendants (the reader's workers, multiprocessing's tracker), from
    each process's parent in ``/proc/*/stat`` (``/proc/PID/task/TID/children`` needs
    CONFIG_PROC_CHILDREN, which the test bed's kernel lacks)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found = [pid]
    for each in found:  # grows as descendants are found
        found += [child for child, parent in parents.items() if parent == each]
    return found


def in_guest(
    spans: int, writers: int, workers: int, buffer_kib: int, deadline_s: float
) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp())
    ready = directory / "ready"
    reader = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--prefix", PREFIX, "--ready-file", str(ready), "-o", "/dev/null", "--progress",
         "--workers", str(workers), "--buffer-size-kb", str(buffer_kib)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    lines: list[str] = []
    assert reader.stderr is not None
    stderr = reader.stderr
    tail = threading.Thread(target=lambda: lines.extend(stderr), daemon=True)
    tail.start()
    deadline = time.monotonic() + 300
    while not (ready.exists() and ready.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    each = -(-spans // writers)
    cpus = sorted(os.sched_getaffinity(0))
    running = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "burst_encoded.py"),
                PREFIX,
                str(min(each, spans - n * each)),
                str(n * each),
                str(cpus[n % len(cpus)]),
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )  # fmt: skip
        for n in range(writers)
    ]
    rss_peak = 0
    samples: list[tuple[float, int, int]] = []  # (seconds, spans rebuilt, RSS of the family)

    def poll() -> int:
        nonlocal rss_peak
        rss = sum(status(pid, "VmRSS") for pid in family(reader.pid))
        rss_peak = max(rss_peak, rss)
        rebuilt = _rebuilt(lines)
        samples.append((time.monotonic() - started, rebuilt, rss))
        return rebuilt

    while any(w.poll() is None for w in running):
        poll()
        time.sleep(1)
    wrote = [json.loads(w.communicate()[0]) for w in running]
    writers_done = time.monotonic() - started
    written = sum(w["spans"] for w in wrote)
    last, since = -1, time.monotonic()
    # until every span is rebuilt or counted lost, nothing moved for ``STALL`` s, or the
    # deadline (then what is still in the ring buffer is neither rebuilt nor lost: said)
    while (
        poll() + _lost(lines) < written
        and time.monotonic() - since < STALL
        and time.monotonic() - started < deadline_s
    ):
        if samples[-1][1] != last:
            last, since = samples[-1][1], time.monotonic()
        time.sleep(1)
    caught_up = time.monotonic() - started
    hwm = {pid: status(pid, "VmHWM") for pid in family(reader.pid)}
    buffers = _buffer_stats(ready.read_text().strip())
    reader.send_signal(signal.SIGINT)
    reader.wait(timeout=600)
    tail.join(timeout=30)
    summary = lines[-1] if lines else ""
    return {
        "spans": spans,
        "writers": writers,
        "workers": workers,
        "buffer_size_kb": buffer_kib,
        "written": sum(w["stats"]["written"] for w in wrote) - _resources(wrote),
        "write_failed": sum(w["failed"] for w in wrote),
        "writer_seconds": max(w["elapsed"] for w in wrote),
        "writers_done_s": writers_done,
        "caught_up_s": caught_up,
        "rebuilt": _rebuilt([summary]),
        "lost": _lost([summary]),
        "hwm_kib": hwm,
        "hwm_sum_kib": sum(hwm.values()),
        "reader_hwm_kib": hwm.get(reader.pid, 0),
        "rss_sum_peak_kib": rss_peak,
        "samples": samples[:: max(1, len(samples) // 60)],
        "summary": summary,
        "buffers": buffers,
        "guest_cpus": len(cpus),
    }


def _buffer_stats(instance: str) -> dict[str, Any]:
    """The reader's ring buffer as the kernel sees it: its size, and each CPU's counts
    (``overrun``: events lost there)."""
    base = Path("/sys/kernel/tracing/instances") / instance
    found: dict[str, Any] = {}
    for name in ("buffer_size_kb", "buffer_total_size_kb"):
        try:
            found[name] = (base / name).read_text().strip()
        except OSError:
            pass
    for cpu in sorted(base.glob("per_cpu/cpu*")):
        try:
            lines = (cpu / "stats").read_text().splitlines()
        except OSError:
            continue
        found[cpu.name] = dict(line.split(": ", 1) for line in lines if ": " in line)
    return found


def _resources(wrote: list[dict[str, Any]]) -> int:
    """The resource records among the exporters' written counts (one per writer, and one
    more each resource interval): written minus the spans each writer wrote."""
    return sum(w["stats"]["written"] - w["spans"] for w in wrote)


def _rebuilt(lines: list[str]) -> int:
    for line in reversed(lines):
        found = re.search(r"(\d+) spans and \d+ logs rebuilt", line)
        if found:
            return int(found[1])
    return 0


def _lost(lines: list[str]) -> int:
    for line in reversed(lines):
        found = re.search(r", lost (\d+)", line)
        if found:
            return int(found[1])
    return 0


def report(result: dict[str, Any], machine: str) -> str:
    buffers = [k for k in result.get("buffers", {}) if k.startswith("cpu")]
    cpus = result.get("guest_cpus") or len(buffers)
    if cpus:  # qemu is given two vCPUs; the guest's kernel may use one (one ring buffer)
        machine += f"{', ' if machine else ''}{cpus} CPU{'s' if cpus > 1 else ''} in the guest"
    hwm = result["hwm_sum_kib"] / 1024
    left = result["written"] - result["rebuilt"] - result["lost"]
    verdict = "met" if hwm < GOAL_MIB else f"missed by {hwm - GOAL_MIB:.0f} MiB"
    return "\n".join([
        f"record through a burst ({machine}): {result['spans']:,} spans from "
        f"{result['writers']} writers (pre-encoded records, own ids) in "
        f"{result['writer_seconds']:.0f} s ({result['spans'] / result['writer_seconds']:,.0f}"
        f" spans/s), --workers {result['workers']}, --buffer-size-kb "
        f"{result['buffer_size_kb']:,}",
        f"written {result['written']:,} (+ resource records), rebuilt {result['rebuilt']:,}, "
        f"lost {result['lost']:,}"
        + (f", {left:,} neither (still in the ring buffer when stopped)" if left > 0 else "")
        + f"; the reader {'stopped' if left > 0 else 'caught up'} {result['caught_up_s']:.0f} s"
        f" after the start ({result['writers_done_s']:.0f} s for the writers)",
        f"peak RSS: the reader {result['reader_hwm_kib'] / 1024:.0f} MiB, with its workers "
        f"{hwm:.0f} MiB (VmHWM summed; each: "
        + ", ".join(f"{v / 1024:.0f}" for v in result["hwm_kib"].values())
        + f" MiB), largest RSS sum seen {result['rss_sum_peak_kib'] / 1024:.0f} MiB",
        f"targets: record through a {result['spans']:,}-span burst under {GOAL_MIB} MiB: "
        f"{verdict}",
    ])  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--buffer-size-kb", type=int, default=524288, help="per CPU")
    parser.add_argument("--memory-mb", type=int, default=4096, help="the guest's")
    parser.add_argument(
        "--deadline", type=float, default=900, help="seconds the reader gets, in the guest"
    )
    parser.add_argument("--timeout", type=float, default=1800, help="the guest's, seconds")
    parser.add_argument("--json", metavar="FILE", help="also write the result here")
    parser.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_guest:
        result = in_guest(
            args.spans, args.writers, args.workers, args.buffer_size_kb, args.deadline
        )
        save_result("reader_memory", result)
        return 0
    kernel = os.environ.get(guest.KERNEL_ENV)
    reason = guest.unavailable_reason(kernel)
    if reason is not None or kernel is None:
        print(f"reader_memory: {reason}", file=sys.stderr)
        return 2
    kept: dict[str, Any] = {}

    def keep(share: Path) -> None:
        if (share / "reader_memory.json").exists():
            kept["result"] = json.loads((share / "reader_memory.json").read_text())

    command = [sys.executable, "benchmarks/reader_memory.py", "--in-guest", "--spans",
               str(args.spans), "--writers", str(args.writers), "--workers", str(args.workers),
               "--buffer-size-kb", str(args.buffer_size_kb),
               "--deadline", str(args.deadline)]  # fmt: skip
    run = guest.run(
        kernel, command, cwd=ROOT, keep=keep, timeout=args.timeout, memory_mb=args.memory_mb
    )
    if "result" not in kept:
        print(run.output[-4000:], file=sys.stderr)
        return 1
    result = kept["result"]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(report(result, f"qemu TCG guest, {args.memory_mb} MiB, {Path(kernel).name}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
