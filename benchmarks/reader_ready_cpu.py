# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The CPU ``otel-userevents`` spends before it listens: a daemon every new app waits for
should be ready in well under a second of its own CPU (issue 45's target: 0.3 CPU-s on a
host for ``record``). CPU, not wall time: on a shared machine the wall time is mostly
waiting for a CPU.

One command, on the host (add ``USER_EVENTS_KERNEL=../shared/kernel/bzImage`` for the test
bed too):

    .venv/bin/python benchmarks/reader_ready_cpu.py

- Host: the entry point (what the ``otel-userevents`` script runs) pointed at an empty
  directory as its tracefs, the kernel absent: it exits where it would check for
  user_events and create its instance, so the figure is everything before listening but
  the kernel's part (and, for ``--kernel``, but the kernel view's modules, loaded after the
  instance exists). User + system CPU of the process from exec to exit (``wait4``).
- Test bed (emulated, so only the ratios between cases carry over): a real reader, from
  exec until its ``--ready-file`` appears (the ready line is out by then), its CPU read
  from ``/proc/PID/stat`` at that moment.

Medians of ``--rounds`` runs, cases in turn so that a drift of the machine weighs on all.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.guest_run import run_in_guest, save_result  # noqa: E402

ENTRY = [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.entry_point"]
CASES: dict[str, list[str]] = {
    "record": ["record"],
    "record --prefix '*'": ["record", "--prefix", "*"],
    "record --kernel sched,syscalls": ["record", "--kernel", "sched,syscalls"],
    "record --exporter otlp_proto_http": ["record", "--exporter", "otlp_proto_http"],
    "--help": ["--help"],
}
TICK = os.sysconf("SC_CLK_TCK")


def host_cpu(argv: list[str], tracefs: str) -> float:
    """CPU seconds of one run, exec to exit, with ``tracefs`` an empty directory."""
    if argv != ["--help"]:
        argv = ["--tracefs", tracefs, *argv, "-o", os.devnull]
    process = subprocess.Popen(
        [*ENTRY, *argv], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped here
    return usage.ru_utime + usage.ru_stime


def ready_cpu(argv: list[str], scratch: Path) -> float:
    """CPU seconds of a real reader from exec until its ready file appears."""
    ready = scratch / "ready"
    ready.unlink(missing_ok=True)
    reader = subprocess.Popen(
        [*ENTRY, *argv, "--ready-file", str(ready), "-o", str(scratch / "out.jsonl")],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while not (ready.exists() and ready.read_text()):
            if reader.poll() is not None:
                raise RuntimeError(f"{argv}: the reader exited ({reader.returncode})")
            time.sleep(0.005)
        with open(f"/proc/{reader.pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    finally:
        reader.terminate()
        reader.wait(120)


def measure(rounds: int, in_guest: bool) -> dict[str, float]:
    """Median CPU seconds per case."""
    taken: dict[str, list[float]] = {case: [] for case in CASES}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(rounds):
            for case, argv in CASES.items():
                if in_guest and argv == ["--help"]:
                    taken[case].append(host_cpu(argv, scratch))
                elif in_guest:
                    taken[case].append(ready_cpu(argv, Path(scratch)))
                else:
                    taken[case].append(host_cpu(argv, scratch))
    return {case: statistics.median(values) for case, values in taken.items()}


def report(results: dict[str, float], where: str) -> str:
    lines = [f"otel-userevents, CPU seconds before it listens ({where}), medians", ""]
    lines += [f"{case:40} {seconds:7.3f} CPU-s" for case, seconds in results.items()]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--guest-rounds", type=int, default=3)
    parser.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_guest:
        save_result("reader_ready_cpu", measure(args.guest_rounds, in_guest=True))
        return 0
    print(report(measure(args.rounds, in_guest=False), "host, no user_events: to where it "
                 "would create its instance"))  # fmt: skip
    if not os.environ.get("USER_EVENTS_KERNEL"):
        return 0
    code, result, machine = run_in_guest(
        "reader_ready_cpu", ["--guest-rounds", str(args.guest_rounds)]
    )
    if code:
        return code
    print()
    print(report(result, f"test bed: {machine}, exec to the ready file"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
