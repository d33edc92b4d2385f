# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the worst spans cost the reader with ``--kernel``, on this machine (no guest):

    .venv/bin/python benchmarks/kernel_view_worst_span.py

Threads with full timelines (``--events`` each: switches, and syscalls with a wait off the
CPU long enough to be a span event in each), and:

- ``worst span``: a span claiming ``[1, 2^63)`` on it, summed by the kernel view (its
  per-span budget, :data:`.kernel_timeline.MAX_SCAN` events);
- ``worst read``: such spans from processes enough to spend the budget for all
  (:data:`.kernel_budget.MAX_READ_SCAN`), then more that sum nothing: a read's worst case,
  which is also a second's (the budgets refill at their size per second);
- ``new thread``: a thread started once :data:`.kernel_timeline.MAX_THREADS` are kept (each
  makes room for itself).

Figures are the median of ``--repeat`` runs, in ms of this process's CPU time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout  # noqa: E402
from opentelemetry_exporter_userevents.reader.decode.checked_records import (  # noqa: E402
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.views.kernel_budget import (  # noqa: E402
    MAX_PROCESS_READ_SCAN,
    MAX_READ_SCAN,
    ScanBudget,
)
from opentelemetry_exporter_userevents.reader.views.kernel_events import (  # noqa: E402
    KernelEvents,
)
from opentelemetry_exporter_userevents.reader.views.kernel_processes import (  # noqa: E402
    ProcessKey,
)
from opentelemetry_exporter_userevents.reader.views.kernel_timeline import (  # noqa: E402
    MAX_THREADS,
)
from opentelemetry_exporter_userevents.reader.views.kernel_view import KernelView  # noqa: E402

HUGE = (1, 2**63 - 1)


def _span(span_id: int) -> CheckedSpan:
    return CheckedSpan(
        1, span_id, None, False, 1, (), "huge", 1, 0, "", *HUGE, {}, 0, [], 0, [], 0, "", None
    )


def _view(events_per_thread: int, threads: int) -> KernelView:
    """A view whose timeline holds ``threads`` busy threads, one process each."""
    events = KernelEvents(None, PageLayout())  # type: ignore[arg-type]
    timeline = events.timeline
    for tid in range(1, threads + 1):
        timeline.watch(tid, 0, ProcessKey(tid, 1))
        for n in range(events_per_thread // 3):  # on 1 ms, a syscall, asleep 2 ms: a wait
            at = 1_000 + n * 3_000_000
            timeline.switch(at, 0, 0x1, tid)
            timeline.syscall_enter(at + 100, tid, "nanosleep")
            timeline.switch(at + 1_000_000, tid, 0x1, 0)
            timeline.syscall_exit(at + 3_000_000 - 100, tid)
    clock = iter(range(10**9))  # a second between reads: every read finds full budgets
    return KernelView(events, budget=ScanBudget(clock=lambda: float(next(clock))))


def _cpu_ms(work: object) -> float:
    start = time.process_time()
    work()  # type: ignore[operator]
    return (time.process_time() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=400_000, help="per thread (400,000)")
    parser.add_argument("--repeat", type=int, default=9, help="runs per figure (9)")
    args = parser.parse_args()
    processes = MAX_READ_SCAN // MAX_PROCESS_READ_SCAN + 2
    view = _view(args.events, processes)
    events = view.events

    def worst_span() -> None:
        events.reads += 1
        view(_span(1), 1)

    def worst_read() -> None:
        events.reads += 1
        for n in range(4 * MAX_READ_SCAN // 4096):
            view(_span(n), 1 + n % processes)

    span_ms = statistics.median(_cpu_ms(worst_span) for _ in range(args.repeat))
    scanned = view.stats.scanned
    worst_span()
    scanned = view.stats.scanned - scanned
    before = view.stats.scanned
    read_ms = statistics.median(_cpu_ms(worst_read) for _ in range(args.repeat))
    read_scanned = (view.stats.scanned - before) // args.repeat
    timeline = view.events.timeline
    for tid in range(10**6, 10**6 + MAX_THREADS):
        timeline.watch(tid, 0)
    churn = 20_000
    start = 2 * 10**6
    thread_ms = _cpu_ms(lambda: [timeline.watch(start + n, 0) for n in range(churn)])
    print(f"worst span: {span_ms:.2f} ms CPU ({scanned} kernel events summed)")
    print(f"worst read: {read_ms:.1f} ms CPU ({read_scanned} kernel events summed)")
    print(f"new thread past {MAX_THREADS} kept: {thread_ms * 1000 / churn:.2f} µs CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
