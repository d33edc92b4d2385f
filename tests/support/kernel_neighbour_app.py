# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Neighbours that abuse the kernel view, for its kernel tests. Each prints one JSON line.

``python -m tests.support.kernel_neighbour_app MODE PREFIX ARG``:

- ``huge PREFIX -``: syscalls (20 ``getppid`` each 20 ms, so its thread soon has more
  kernel events than a span may sum), and each second a span that claims the interval
  ``[1, 2^63 - 1]``, until SIGTERM.
- ``churn PREFIX PER_SECOND``: one span, then threads started (each exits at once; at most
  :data:`ALIVE` at a time, none joined) at PER_SECOND at most (0: as fast as it can), and a
  span ``churned`` (``threads``: how many so far) each 1,000, until SIGTERM: how many, and
  how many per second.

The rates are what the reader keeps up with in the emulated guest (it decodes a few
thousand kernel events a second there): at the guest's fastest churn (about 370 threads a
second, some 30 kernel events each) the kernel's buffer overflows, and every span that
overlaps a loss is rightly partial.
- ``steal PREFIX VICTIM_TID``: a span that sleeps 200 ms and names another process's
  thread as its ``linux.thread.id``.
- ``spin PREFIX SECONDS``: a span, then on the CPU (the victim ``steal`` names): its tid.
- ``storm PREFIX RATE``: a syscall storm (``getppid``, RATE a second, or as fast as it can
  with ``-``, on its main thread) in spans ``storm`` of a second each, until SIGTERM: its
  pid, syscalls, spans.
"""

from __future__ import annotations

import _thread
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from opentelemetry_exporter_userevents import UserEventsSpanExporter, UserEventsSpanProcessor

HUGE_END = 2**63 - 1
ALIVE = 64
"""Churned threads alive at once at most (more only wait for the GIL, then fail to start)."""
_stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: _stop.set())


def _tracer(prefix: str, name: str) -> tuple[TracerProvider, Tracer]:
    provider = TracerProvider(resource=Resource({"service.name": name}))
    provider.add_span_processor(UserEventsSpanProcessor(UserEventsSpanExporter(prefix=prefix)))
    return provider, provider.get_tracer("kernel.neighbour")


def huge(tracer: Tracer) -> dict[str, Any]:
    spans = syscalls = 0
    next_span = 0.0
    while not _stop.is_set():
        now = time.monotonic()
        for _ in range(20):
            os.getppid()
        syscalls += 20
        if now >= next_span:
            span = tracer.start_span("huge", start_time=1)
            span.end(end_time=HUGE_END)
            spans += 1
            next_span = now + 1.0
        time.sleep(0.02)
    return {"spans": spans, "syscalls": syscalls, "ended_ns": time.time_ns()}


def churn(tracer: Tracer, per_second: float) -> dict[str, Any]:
    with tracer.start_as_current_span("churn"):
        pass
    started = time.monotonic()
    threads = 0
    room = threading.BoundedSemaphore(ALIVE)
    while not _stop.is_set():
        if not room.acquire(timeout=0.1):
            continue
        _thread.start_new_thread(room.release, ())
        threads += 1
        if per_second:
            time.sleep(1 / per_second)
        if threads % 1000 == 0:
            with tracer.start_as_current_span("churned", attributes={"threads": threads}):
                pass
    elapsed = time.monotonic() - started
    return {"threads": threads, "per_second": threads / elapsed, "ended_ns": time.time_ns()}


def steal(tracer: Tracer, victim: int) -> dict[str, Any]:
    with tracer.start_as_current_span("warm-up"):
        pass
    with tracer.start_as_current_span("steal", attributes={"linux.thread.id": victim}) as span:
        time.sleep(0.2)
    return {"span_id": f"{span.get_span_context().span_id:016x}", "tid": threading.get_native_id()}


def spin(tracer: Tracer, seconds: float) -> dict[str, Any]:
    with tracer.start_as_current_span("victim"):
        pass
    sys.stdout.write(json.dumps({"tid": threading.get_native_id()}) + "\n")
    sys.stdout.flush()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass
    return {}


def storm(tracer: Tracer, rate: float | None) -> dict[str, Any]:
    spans = syscalls = 0
    began = time.monotonic()
    while not _stop.is_set():
        with tracer.start_as_current_span("storm"):
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline and not _stop.is_set():
                for _ in range(1000):
                    os.getppid()
                syscalls += 1000
                if rate is not None:  # paced: the next thousand when they are due
                    time.sleep(max(0.0, began + syscalls / rate - time.monotonic()))
        spans += 1
    return {"pid": os.getpid(), "syscalls": syscalls, "spans": spans, "ended_ns": time.time_ns()}


def main(mode: str, prefix: str, arg: str) -> dict[str, Any]:
    provider, tracer = _tracer(prefix, f"neighbour-{mode}")
    try:
        if mode == "huge":
            return huge(tracer)
        if mode == "churn":
            return churn(tracer, float(arg))
        if mode == "steal":
            return steal(tracer, int(arg))
        if mode == "storm":
            return storm(tracer, None if arg == "-" else float(arg))
        return spin(tracer, float(arg))
    finally:
        provider.shutdown()


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2], sys.argv[3])
    if result:
        sys.stdout.write(json.dumps(result) + "\n")
