# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Load on a real kernel: 8 threads export spans at once, and every count is exact.

``USER_EVENTS_LOAD_SPANS`` sets the spans per thread: 100,000 by default on a native
kernel, 2,000 in the qemu guest, whose one CPU is emulated in software (about a hundred
times slower). The test bed passes the variable on to the guest.
"""

from __future__ import annotations

import hashlib
import os
import threading

import pytest
from opentelemetry.sdk.trace import TracerProvider

from opentelemetry_exporter_userevents import UserEventsSpanExporter, UserEventsSpanProcessor
from tests.support.kernel_support import wait_until
from tests.support.span_fixtures import make_spans

pytestmark = pytest.mark.kernel

THREADS = 8


def spans_per_thread() -> int:
    configured = os.environ.get("USER_EVENTS_LOAD_SPANS")
    if configured:
        return int(configured)
    return 2_000 if os.environ.get("USER_EVENTS_TESTBED_GUEST") == "1" else 100_000


@pytest.fixture
def exporter(event_name):
    prefix = "p" + hashlib.blake2b(event_name.encode(), digest_size=6).hexdigest()
    exporter = UserEventsSpanExporter(prefix=prefix)
    yield exporter
    exporter.shutdown()


def run_threads(work, count: int) -> None:
    """``work(thread_number)`` ``count`` times in each of THREADS threads, started at once."""
    start = threading.Barrier(THREADS)

    def loop(number: int) -> None:
        start.wait()
        for _ in range(count):
            work(number)

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def span_emitter(provider: TracerProvider):
    tracer = provider.get_tracer("load")

    def emit(number: int) -> None:
        with tracer.start_as_current_span(f"t{number}"):
            pass

    return emit


def test_eight_threads_with_a_listener_are_counted_exactly(exporter, attach):
    provider = TracerProvider()
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    attach(exporter.registration)
    offered = THREADS * spans_per_thread()

    run_threads(span_emitter(provider), spans_per_thread())

    stats = exporter.stats.snapshot()
    assert stats["written"] == offered, stats
    assert exporter.stats.dropped == 0 and stats["not_listened"] == 0
    assert attach.recorded() == offered, "the buffer took in every record written"


def test_a_listener_detaching_under_load_leaves_exact_counts(exporter, attach, tracefs):
    """Each span is written, skipped (nobody listens) or dropped (the listener left between
    the check and the write), exactly once: the batch path, where export() counts skips. A
    write racing the detach may also succeed while no buffer keeps it: the kernel checks the
    tracepoint's enabled key before it looks for the probes ("It's possible key.enabled
    disables after this check", trace_events_user.c), so the buffer holds at most what was
    written."""
    attach(exporter.registration)
    per_thread = spans_per_thread()
    offered = THREADS * per_thread
    registration = exporter.registration
    batch = make_spans()[:1]

    def detach_midway() -> None:
        wait_until(lambda: exporter.stats.written >= offered // 4, timeout=600)
        tracefs.set_enabled(registration.system, registration.tracepoint, False, attach.instance)

    detacher = threading.Thread(target=detach_midway)
    detacher.start()
    run_threads(lambda _: exporter.export(batch), per_thread)
    detacher.join()

    stats = exporter.stats.snapshot()
    assert stats["written"] + stats["not_listened"] + exporter.stats.dropped == offered, stats
    assert stats["dropped_detached"] == exporter.stats.dropped, "no other kind of drop"
    assert stats["written"] >= offered // 4
    assert attach.recorded() <= stats["written"]
