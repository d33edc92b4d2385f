# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""An app whose spans do known kind of kernel work, each measured by the kernel's own
accounting read independently of any trace event: the thread's CPU time
(``CLOCK_THREAD_CPUTIME_ID``), its run-queue wait (``/proc/thread-self/schedstat``, second
field) and its context switches (``/proc/thread-self/status``), read just after the span
starts and just before it ends. ``gap_ns`` is how long the span ran outside those reads:
what the kernel view may count that the reads do not.

``python -m tests.support.kernel_work_app PREFIX N_READS [ONLY]``: a ``warm-up`` span (not
measured), then spans ``spin``, ``sleep``,
``lock`` (waits for a lock another thread holds), ``reads`` (N ``pread`` calls), and
``thread a`` and ``thread b`` (each on a thread of its own, spinning at once); with
``ONLY`` (``spin`` or ``sleep``), that span alone. Each measured span sets ``thread.id`` as
the semantic conventions say (``threading.get_ident()``, the runtime's id, not the OS's).
Prints one JSON line: per span name, its ids, OS thread id, ``thread.id`` and the measured
deltas.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from opentelemetry_exporter_userevents import UserEventsSpanExporter, UserEventsSpanProcessor

SPIN_S = 0.15
LOCK_ASKED_S = 0.1
"""How long the lock's holder keeps it once the main thread says it asks for it: the main
thread, given the GIL by the holder's sleep, is blocked in the lock's ``futex`` by then."""


def _counters() -> tuple[int, int, int, int]:
    """(CPU ns, run-queue wait ns, voluntary switches, involuntary switches) of this thread."""
    cpu = time.clock_gettime_ns(time.CLOCK_THREAD_CPUTIME_ID)
    with open("/proc/thread-self/schedstat", encoding="ascii") as f:
        wait = int(f.read().split()[1])
    voluntary = involuntary = 0
    with open("/proc/thread-self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                voluntary = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                involuntary = int(line.split()[1])
    return cpu, wait, voluntary, involuntary


def measured(tracer: Tracer, name: str, work: Callable[[], None], out: dict[str, Any]) -> None:
    """Run ``work`` in a span, with the counters read inside it at both ends."""
    ident = threading.get_ident()
    with tracer.start_as_current_span(name, attributes={"thread.id": ident}) as span:
        start = span.start_time  # type: ignore[attr-defined]
        before = _counters()
        first_read_done = time.time_ns()
        work()
        last_read_start = time.time_ns()
        after = _counters()
        end_read_done = time.time_ns()
    context = span.get_span_context()
    out[name] = {
        "span_id": f"{context.span_id:016x}",
        "tid": threading.get_native_id(),
        "ident": ident,
        "cpu_ns": after[0] - before[0],
        "run_delay_ns": after[1] - before[1],
        "voluntary": after[2] - before[2],
        "involuntary": after[3] - before[3],
        "window_ns": last_read_start - first_read_done,
        "gap_ns": (first_read_done - start) + (span.end_time - last_read_start),  # type: ignore[attr-defined]
        "end_read_ns": end_read_done - last_read_start,
    }


def spin() -> None:
    """Run on the CPU: ``time.monotonic`` reads the vDSO, no syscall."""
    deadline = time.monotonic() + SPIN_S
    while time.monotonic() < deadline:
        pass


def main(prefix: str, reads: int, only: str | None = None) -> dict[str, Any]:
    provider = TracerProvider(resource=Resource({"service.name": "kernel-work"}))
    provider.add_span_processor(UserEventsSpanProcessor(UserEventsSpanExporter(prefix=prefix)))
    tracer = provider.get_tracer("kernel.work")
    out: dict[str, Any] = {"pid": os.getpid()}
    measured(tracer, "warm-up", lambda: None, {})  # what a first span loads, loaded outside
    if only is not None:
        measured(tracer, only, {"spin": spin, "sleep": lambda: time.sleep(0.2)}[only], out)
        provider.shutdown()
        return out
    measured(tracer, "spin", spin, out)
    measured(tracer, "sleep", lambda: time.sleep(0.2), out)

    lock, held, asking = threading.Lock(), threading.Event(), threading.Event()

    def holder() -> None:
        with lock:
            out["holder_tid"] = threading.get_native_id()
            held.set()
            spin()
            # released only once main is asking for it: after its spin alone, a main thread
            # descheduled for as long (a loaded host) took the lock free, with no waker
            asking.wait()
            time.sleep(LOCK_ASKED_S)

    def wait_for_the_lock() -> None:
        asking.set()
        lock.acquire()
        lock.release()

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait()
    measured(tracer, "lock", wait_for_the_lock, out)
    thread.join()

    with tempfile.TemporaryFile() as f:
        f.write(b"x" * 4096)
        f.flush()
        fd = f.fileno()
        measured(tracer, "reads", lambda: [os.pread(fd, 64, 0) for _ in range(reads)] and None, out)

    start = threading.Barrier(2)

    def own_span(name: str) -> None:
        start.wait()
        measured(tracer, name, spin, out)

    threads = [threading.Thread(target=own_span, args=(n,)) for n in ("thread a", "thread b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    provider.shutdown()
    return out


if __name__ == "__main__":
    only = sys.argv[3] if len(sys.argv) > 3 else None
    sys.stdout.write(json.dumps(main(sys.argv[1], int(sys.argv[2]), only)) + "\n")
