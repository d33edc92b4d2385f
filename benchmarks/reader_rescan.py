# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the reader's periodic rescans cost per second with many user_events names on the
host (issue 42: 10,000 names, 196 ms a rescan, every 0.5 s), on the host: a directory tree
as tracefs, so the listing's kernel part is tmpfs's, not eventfs's (in an emulated 6.12
guest, listing 10,004 names took 14 ms; the look at each name after it is the same code).

    .venv/bin/python benchmarks/reader_rescan.py [--names 10000] [--seconds 20]

Both ways in turn, each for ``--seconds``, as the rescan thread calls them (every 0.5 s):
``every interval`` (a full rescan each time, as before) and ``schedule`` (what
``live/rescan_schedule.py`` allows with no change signal, its worst case: a kernel without
MULTI_FORMAT). It prints the CPU and wall time per second each took, and the listings.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs  # noqa: E402
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM  # noqa: E402
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader  # noqa: E402

INTERVAL = 0.5


def _run(tracefs: Tracefs, seconds: float, scheduled: bool) -> tuple[float, float, int]:
    """CPU and wall seconds spent rescanning per second, and the full listings."""
    reader = TraceReader(tracefs, prefix="*", hold=False)
    cpu = wall = 0.0
    listings = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(INTERVAL)
        began, began_cpu = time.monotonic(), time.thread_time()
        if scheduled:
            listings += reader.rescan_if_due()
        else:
            reader.scan()
            listings += 1
        wall += time.monotonic() - began
        cpu += time.thread_time() - began_cpu
    return cpu / seconds, wall / seconds, listings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        system = Path(root) / "events" / USER_EVENTS_MULTI_SYSTEM
        system.mkdir(parents=True)
        for n in range(args.names):
            (system / f"other_{n}.{n:x}").mkdir()
        tracefs = Tracefs(root)
        for label, scheduled in (("every interval", False), ("schedule", True)):
            cpu, wall, listings = _run(tracefs, args.seconds, scheduled)
            print(
                f"{label:>14}: {cpu * 1000:6.1f} ms CPU and {wall * 1000:6.1f} ms wall per "
                f"second, {listings} full listings in {args.seconds:.0f} s "
                f"({args.names} other names)"
            )


if __name__ == "__main__":
    main()
