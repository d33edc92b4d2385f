# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The kernel view's bounds under hostile input: spans claiming huge intervals, threads
started by the thousand, pids reused, a listing the kernel refuses, a ``/proc`` of another
pid namespace (the kernel test shows the same with real processes)."""

from __future__ import annotations

import json
import struct
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.abi.sched import RUNNABLE, SLEEPING
from opentelemetry_exporter_userevents.reader.decode.checked_records import CheckedSpan
from opentelemetry_exporter_userevents.reader.views import kernel_events as kernel_events_module
from opentelemetry_exporter_userevents.reader.views import kernel_timeline as timeline_module
from opentelemetry_exporter_userevents.reader.views.kernel_budget import (
    MAX_PROCESS_READ_SCAN,
    ScanBudget,
)
from opentelemetry_exporter_userevents.reader.views.kernel_events import (
    MAX_ANNOUNCED_THREADS,
    KernelEvents,
    KernelEventsError,
)
from opentelemetry_exporter_userevents.reader.views.kernel_processes import (
    ProcessKey,
    host_pid_namespace_error,
    start_time,
)
from opentelemetry_exporter_userevents.reader.views.kernel_timeline import (
    EXIT_GRACE_NS,
    EXIT_GRACE_READS,
    KernelTimeline,
)
from opentelemetry_exporter_userevents.reader.views.kernel_view import KernelView, kernel_parts

DATA = Path(__file__).resolve().parents[2] / "data"
FORMATS = json.loads((DATA / "kernel_formats_6_12.json").read_text())
MS = 1_000_000
HUGE = (1, 2**63 - 1)
"""The interval a hostile span claims."""
APP, NEIGHBOUR = ProcessKey(100, 7), ProcessKey(200, 9)


class _Tracefs:
    """The tracefs calls KernelEvents makes: formats from the saved files; listings kept."""

    def __init__(self, refuse: int = 0) -> None:
        self.listed: list[list[int]] = []
        self.enabled: list[str] = []
        self.refuse = refuse
        """Listings to refuse (EINVAL) before one succeeds."""

    def read_format(self, system: str, name: str) -> Any:
        return parse_format(FORMATS[f"{system}/{name}"])

    def event_ids(self, system: str) -> dict[int, str]:
        return {
            parse_format(text).id: key.split("/")[1]
            for key, text in FORMATS.items()
            if key.startswith(system + "/")
        }

    def add_event_pids(self, instance: str, pids: list[int]) -> None:
        self.listed.append(list(pids))
        if self.refuse:
            self.refuse -= 1
            raise OSError(22, "Invalid argument")

    def set_enabled(self, system: str, name: str, on: bool, instance: str) -> None:
        self.enabled.append(name)

    def set_system_enabled(self, instance: str, system: str, on: bool) -> None:
        self.enabled.append(system)


def _events(tracefs: _Tracefs | None = None) -> KernelEvents:
    events = KernelEvents(tracefs or _Tracefs(), PageLayout())  # type: ignore[arg-type]
    events._learn_formats()
    return events


def _record(key: str, **values: int) -> memoryview:
    fmt = parse_format(FORMATS[key])
    raw = bytearray(max(max(f.offset + f.size for f in fmt.fields), 16))
    struct.pack_into("<Hi", raw, 0, fmt.id, values.pop("common_pid", 0))
    for name, value in values.items():
        struct.pack_into("<i", raw, fmt.field(name).offset, value)
    return memoryview(bytes(raw))


def _switch(prev: int, state: int, nxt: int) -> memoryview:
    return _record("sched/sched_switch", prev_pid=prev, prev_state=state, next_pid=nxt)


def _span(start: int, end: int, span_id: int = 1, **attrs: Any) -> CheckedSpan:
    return CheckedSpan(
        1, span_id, None, False, 1, (), "work", 1, 0, "", start, end, dict(attrs), 0,
        [], 0, [], 0, "", None,
    )  # fmt: skip


def _busy(timeline: KernelTimeline, tid: int, switches: int) -> None:
    """``tid`` switches in and out ``switches`` times, 1 µs apart, from 1 ms."""
    for n in range(switches):
        at = MS + n * 2_000
        timeline.switch(at, 1, 0x1, tid)
        timeline.switch(at + 1_000, tid, 0x1, 1)


# --- what a span may name, and what it may cost -------------------------------------


def test_a_span_claiming_a_huge_interval_sums_a_few_thousand_events_and_says_partial():
    timeline = KernelTimeline()
    timeline.watch(42, 0)
    _busy(timeline, 42, 50_000)
    summary = timeline.summary(42, *HUGE, 0)
    assert summary is not None and summary.partial
    assert summary.scanned <= 4096
    assert summary.voluntary <= 2048  # half the budget each: transitions, syscalls
    parts = [summary.on_cpu, summary.unknown, *summary.off_cpu.values()]
    assert sum(parts) == HUGE[1] - HUGE[0] and summary.unknown > HUGE[1] // 2


def test_a_process_spends_its_own_budget_per_read_and_per_second_not_anothers():
    events = _events()
    timeline = events.timeline
    timeline.watch(100, 0, APP)
    timeline.watch(200, 0, NEIGHBOUR)
    _busy(timeline, 200, 20_000)
    timeline.switch(200 * MS, 1, 0x1, 100)  # the app's thread runs from 200 ms on
    now = [0.0]
    view = KernelView(events, budget=ScanBudget(clock=lambda: now[0]))
    hostile = [view(_span(*HUGE, span_id=n), 200) for n in range(50)]
    unknown = [span.attributes["linux.kernel.unknown_ns"] for span in hostile]
    assert all(span.attributes["linux.kernel.view"] == "partial" for span in hostile)
    # Its budget spent (a span may pass it by the one event it stops at), the rest of its
    # spans sum nothing: all of each is unknown.
    assert view.stats.scanned <= MAX_PROCESS_READ_SCAN + 2 * 50
    assert all(u > HUGE[1] - HUGE[0] - 2 * MS for u in unknown[-20:])
    assert view.stats.over_budget == 50
    genuine = view(_span(201 * MS, 251 * MS, span_id=99), 100).attributes
    assert genuine["linux.kernel.view"] == "whole"
    assert genuine["linux.sched.on_cpu_ns"] == 50 * MS
    for read in range(100):  # reads as often as it may: 100 in 0.1 s
        now[0] += 0.001
        events.reads += 1
        view(_span(*HUGE, span_id=100 + read), 200)
    assert view.stats.scanned <= MAX_PROCESS_READ_SCAN * 1.1 + 2 * 150
    now[0] += 1.0  # a second later: its whole budget again
    events.reads += 1
    again = view(_span(*HUGE, span_id=51), 200).attributes["linux.kernel.unknown_ns"]
    assert again < HUGE[1] - HUGE[0] - 2 * MS


def test_all_spans_of_one_read_share_a_bound_whatever_the_processes():
    events = _events()
    for pid in range(300, 310):
        events.timeline.watch(pid, 0, ProcessKey(pid, 1))
        _busy(events.timeline, pid, 3_000)
    view = KernelView(events, budget=ScanBudget(overall=10_000, clock=lambda: 0.0))
    spans = [view(_span(*HUGE), pid).attributes for pid in range(300, 310)]
    assert 8_192 < view.stats.scanned <= 10_000  # two whole budgets of 4,096, then the rest
    assert all(s["linux.kernel.unknown_ns"] > HUGE[1] - HUGE[0] - 2 * MS for s in spans[3:])


def test_a_linux_thread_id_of_another_process_is_refused_and_counted():
    events = _events()
    timeline = events.timeline
    timeline.watch(100, 0, APP)
    timeline.watch(200, 0, NEIGHBOUR)
    timeline.switch(MS, 1, 0x1, 100)  # the victim spins from 1 ms
    timeline.switch(MS, 200, 0x1, 1)  # the attacker sleeps from 1 ms
    view = KernelView(events)
    stolen = view(_span(2 * MS, 12 * MS, **{"linux.thread.id": 100}), 200).attributes
    assert (stolen["linux.sched.on_cpu_ns"], stolen["linux.sched.sleeping_ns"]) == (0, 10 * MS)
    assert view.stats.threads_refused == 1
    view(_span(2 * MS, 12 * MS, span_id=2, **{"linux.thread.id": 12345}), 200)  # not watched
    assert view.stats.threads_refused == 2


def test_a_thread_a_fork_event_watched_is_looked_up_once_before_a_span_may_name_it(
    monkeypatch,
):
    lookups: list[int] = []

    def lookup(tid: int) -> ProcessKey | None:
        lookups.append(tid)
        return APP

    monkeypatch.setattr(kernel_events_module, "process_of", lookup)
    events = _events()
    events.timeline.watch(100, 0, APP)
    events.feed([(MS, _record("sched/sched_process_fork", parent_pid=100, child_pid=101))])
    events.feed([(2 * MS, _switch(1, 0x1, 101))])
    view = KernelView(events)
    for n in range(5):
        span = view(_span(3 * MS, 4 * MS, span_id=n, **{"linux.thread.id": 101}), 100)
        assert span.attributes["linux.sched.on_cpu_ns"] == MS
    assert lookups == [101] and view.stats.threads_refused == 0


def test_a_busy_neighbour_filling_the_event_bound_leaves_a_quiet_threads_events():
    timeline = KernelTimeline(max_events=10_000)
    timeline.watch(100, 0, APP)
    timeline.switch(MS, 1, 0x1, 100)  # the app's thread: on the CPU from 1 ms
    timeline.switch(3 * MS, 100, 0x1, 1)  # asleep from 3 ms
    timeline.watch(200, 0, NEIGHBOUR)
    _busy(timeline, 200, 50_000)  # 100,000 events: ten times the bound
    assert timeline.stats.trims >= 10
    assert timeline._events <= 10_000
    summary = timeline.summary(100, 2 * MS, 4 * MS, 0)
    assert summary is not None and not summary.partial
    assert (summary.on_cpu, summary.off_cpu) == (MS, {SLEEPING: MS})


# --- threads and processes that come and go -----------------------------------------


class _CountingThreads(OrderedDict[int, Any]):
    """The timeline's threads, counting every entry looked at."""

    looked_at = 0

    def __getitem__(self, key: int) -> Any:
        _CountingThreads.looked_at += 1
        return super().__getitem__(key)

    def __iter__(self) -> Any:
        for key in super().__iter__():
            _CountingThreads.looked_at += 1
            yield key


def test_a_new_thread_past_the_bound_costs_constant_work_not_a_scan():
    timeline = KernelTimeline(max_threads=4096)
    threads = _CountingThreads()
    timeline._threads = threads
    for tid in range(1, 4097):
        timeline.watch(tid, 0)
    _CountingThreads.looked_at = 0
    for tid in range(10_000, 12_000):  # 2,000 threads started past the bound
        timeline.watch(tid, 0)
    assert _CountingThreads.looked_at <= 4 * 2_000
    assert timeline.stats.threads_forgotten == 2_000 and len(threads) == 4096


def test_exited_threads_are_forgotten_after_their_grace_and_before_any_live_one():
    events = _events()
    timeline = events.timeline
    timeline.watch(100, 0, APP)
    timeline.watch(101, 0, APP)  # a live thread that does nothing the kernel reports
    for tid in range(1_000, 21_000):  # a thread per request, each exits; 1,000 per s
        if tid % 1_000 == 0:  # a read a second
            timeline.next_read(tid * MS)
        events.feed([
            (tid * MS, _record("sched/sched_process_fork", parent_pid=100, child_pid=tid)),
            (tid * MS + 1, _record("sched/sched_process_exit", pid=tid)),
        ])  # fmt: skip
    # 15 s of exits are more than the bound: the exited ones made room, not the live ones.
    assert timeline.watched(100) and timeline.watched(101)
    assert timeline.watched(20_999)  # its spans' records may still come
    for _ in range(EXIT_GRACE_READS - 1):
        timeline.next_read(10**15)
    assert timeline.watched(20_999)  # read twice since (15 s passed): not yet
    timeline.next_read(20_999 * MS + EXIT_GRACE_NS)
    assert timeline.watched(20_999)  # read thrice since, 15 s not passed: not yet
    timeline.next_read(20_999 * MS + 1 + EXIT_GRACE_NS)
    assert not any(timeline.watched(tid) for tid in range(1_000, 21_000))
    assert timeline.watched(100) and timeline.watched(101)
    assert timeline.stats.threads_exited + timeline.stats.threads_forgotten == 20_000
    assert len(timeline._threads) == 2


def _listing(monkeypatch, processes: dict[int, ProcessKey]) -> None:
    """``/proc`` as these processes, one thread each (the leader)."""
    monkeypatch.setattr(kernel_events_module, "process_of", processes.get)
    monkeypatch.setattr(kernel_events_module, "threads_of", lambda pid: [pid])


def test_processes_past_the_bound_are_still_listed(monkeypatch):
    processes = {pid: ProcessKey(pid, 1) for pid in range(1_000, 4_000)}
    _listing(monkeypatch, processes)
    tracefs = _Tracefs()
    events = _events(tracefs)
    for pid in processes:
        events.watch([pid])
    assert [pids for pids in tracefs.listed] == [[pid] for pid in processes]
    assert events.processes.forgotten == 3_000 - 1024
    assert events.stats.processes_not_watched == 0


def test_a_reused_pid_is_a_new_process_listed_and_summed_from_its_own_events(monkeypatch):
    processes = {300: ProcessKey(300, 1)}
    _listing(monkeypatch, processes)
    tracefs = _Tracefs()
    events = _events(tracefs)
    events.watch([300])
    old = time.time_ns() + MS
    events.feed([
        (old, _switch(300, 0x1, 1)),  # the old process sleeps
        (old + 1, _record("sched/sched_process_exit", pid=300)),
    ])  # fmt: skip
    while time.time_ns() <= old + 1:  # the new process starts after the old one's exit
        time.sleep(0.001)
    processes[300] = ProcessKey(300, 2)  # a new process with the same pid
    events.watch([300])
    assert tracefs.listed == [[300], [300]]
    now = time.time_ns()
    events.feed([
        (old + 2, _switch(300, 0x1, 1)),  # a late event of the old one: dropped
        (now + MS, _switch(1, 0x1, 300)),  # the new one gets the CPU and spins
    ])  # fmt: skip
    spin = KernelView(events)(_span(now + 2 * MS, now + 52 * MS), 300).attributes
    assert spin["linux.kernel.view"] == "whole"
    assert (spin["linux.sched.on_cpu_ns"], spin["linux.sched.off_cpu_ns"]) == (50 * MS, 0)
    assert events.timeline.stats.before_watched == 1
    assert events.stats.processes == 2


def test_a_span_past_its_threads_exit_is_partial_not_the_dead_threads():
    """A new process may take the pid before the old one's exit is read: its first spans
    are not the dead thread's figures."""
    timeline = KernelTimeline()
    timeline.watch(300, 0, APP)
    timeline.switch(MS, 300, 0x1, 1)  # asleep from 1 ms
    timeline.exit(10 * MS, 300)
    summary = timeline.summary(300, 20 * MS, 70 * MS, 0)
    assert summary is not None and summary.partial
    assert (summary.unknown, summary.off_cpu) == (50 * MS, {})


def test_an_empty_list_is_never_written_and_nothing_is_enabled_without_a_listing(
    monkeypatch,
):
    """Its threads exit between a refused listing and the retry: an empty set_event_pid
    would be every process on the machine."""
    gone = 2_000_000_000  # no such thread on any machine (pid_max is at most 2^22)
    _listing(monkeypatch, {gone: ProcessKey(gone, 1)})
    tracefs = _Tracefs(refuse=1)
    events = _events(tracefs)
    events.watch([gone])
    assert all(tracefs.listed), tracefs.listed
    assert tracefs.enabled == []
    assert events.stats.processes_not_watched == 1


# --- /proc ---------------------------------------------------------------------------


def test_a_proc_of_another_pid_namespace_is_refused(tmp_path):
    other = tmp_path / "pid"
    other.write_text("")
    reason = host_pid_namespace_error(str(other))
    assert reason is not None and "host's pid namespace" in reason
    assert "cannot tell" in (host_pid_namespace_error(str(tmp_path / "none")) or "")
    events = _events()
    events.init_pid_ns = str(other)
    events.tracefs_instance.create = lambda: pytest.fail("created")  # type: ignore[method-assign]
    with pytest.raises(KernelEventsError, match="host's pid namespace"):
        events.start()


def test_start_time_is_field_22_whatever_the_comm():
    fields = " ".join(str(n) for n in range(3, 53))
    assert start_time(f"77 (a) b) 1 2) {fields}") == 22
    assert start_time(f"77 (x) {fields}".replace(" 22 ", " -5 ")) is None
    assert start_time("77 (x) R 1") is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_stat_text_is_a_start_time_or_none(text):
    got = start_time(text)
    assert got is None or got >= 0


def test_timeline_constants_are_what_the_docs_say():
    assert timeline_module.MAX_SCAN <= 4096


def test_events_after_a_read_began_wait_for_the_next_so_a_thread_moving_cpus_is_in_order(
    monkeypatch,
):
    """CPU 1 is read after CPU 0: its event at 20 ms (after the read began at 15) comes in
    this read, CPU 0's at 18 ms (preempted) only in the next."""
    events = _events()
    events.timeline.watch(100, 0, APP)
    events.feed([(MS, _switch(1, 0x1, 100))])  # on the CPU from 1 ms
    clock = [15 * MS]
    monkeypatch.setattr(time, "clock_gettime_ns", lambda clock_id: clock[0])
    reads = iter([
        [(20 * MS, _switch(1, 0x1, 100))],  # back on CPU 1 at 20 ms
        [(18 * MS, _switch(100, 0x100, 1))],  # preempted on CPU 0 at 18 ms
    ])  # fmt: skip
    monkeypatch.setattr(events, "_read_records", lambda: next(reads))
    assert events.read() == 0  # held: after the read began
    clock[0] = 25 * MS
    assert events.read() == 2
    summary = events.timeline.summary(100, 10 * MS, 24 * MS, 0)
    assert summary is not None and not summary.partial
    assert (summary.on_cpu, summary.off_cpu) == (12 * MS, {RUNNABLE: 2 * MS})
    assert events.timeline.stats.out_of_order == 0


def test_an_announcement_is_listed_while_a_read_of_the_kernels_events_is_under_way(monkeypatch):
    """The thread that answers announcements lists an app's threads in ``set_event_pid`` at
    once, even while the main loop is in a long read of the kernel's events (a CI run on a
    slow host saw an app's first span begin unwatched); the timeline, the main loop's own,
    learns of them at its next read."""
    _listing(monkeypatch, {APP.pid: APP})
    reading, release = threading.Event(), threading.Event()

    class SlowPipes:
        lost, last_read_lost = 0, False

        def read(self, page_size: int, count_idle_cpus: bool = True) -> list[tuple[int, bytes]]:
            reading.set()
            release.wait(30)
            return []

    tracefs = _Tracefs()
    events = _events(tracefs)
    events.pipes = SlowPipes()  # type: ignore[assignment]
    main_loop = threading.Thread(target=events.read)
    main_loop.start()
    assert reading.wait(10)
    announced = threading.Thread(target=events.watch_announced, args=({APP.pid},))
    announced.start()
    announced.join(10)
    try:
        assert not announced.is_alive(), "the announcement waited for the read"
        assert tracefs.listed == [[APP.pid]]
        assert not events.timeline.watched(APP.pid)
    finally:
        release.set()
        main_loop.join(10)
    events.read()
    assert events.timeline.watched(APP.pid)
    assert events.timeline.process(APP.pid) == APP
    assert events.stats.processes == 1


def test_threads_announced_just_before_a_read_get_its_events(monkeypatch):
    """An app announced while the main loop starts a read (after it took the threads
    announced so far): the events that read brings of that app's threads are summed, not
    dropped as an unwatched thread's (a CI run saw a 200-ms span all ``unknown``)."""
    _listing(monkeypatch, {APP.pid: APP})
    events = _events()

    def read_begins(clock_id: int) -> int:
        """The read's start on the trace clock, as an app is announced just then (by the
        announcements' thread)."""
        events.watch_announced({APP.pid})
        return 2**62

    monkeypatch.setattr(time, "clock_gettime_ns", read_begins)
    monkeypatch.setattr(
        events, "_read_records", lambda: [(time.time_ns(), _switch(1, 0x1, APP.pid))]
    )
    assert events.read() == 1
    on_cpu_at = events.timeline._threads[APP.pid].times[-1]
    summary = events.timeline.summary(APP.pid, on_cpu_at, on_cpu_at + MS, 0)
    assert summary is not None and not summary.partial
    assert summary.on_cpu == MS


def test_threads_announced_while_the_main_loop_reads_nothing_are_bounded_and_counted(
    monkeypatch,
):
    """A stalled main loop takes none of the threads the announcements' thread listed: past
    the bound they are dropped, counted, and watched from their first record instead."""
    processes = {
        pid: ProcessKey(pid, 1) for pid in range(1_000, 1_000 + MAX_ANNOUNCED_THREADS + 500)
    }
    _listing(monkeypatch, processes)
    tracefs = _Tracefs()
    events = _events(tracefs)
    for pid in processes:
        events.watch_announced({pid})
    assert len(events._announced) == MAX_ANNOUNCED_THREADS
    assert events.stats.announced_dropped == 500
    assert "500 announcing threads watched from their first record (too many waiting)" in (
        kernel_parts(KernelView(events))
    )
    assert len(tracefs.listed) == len(processes)  # each still listed in set_event_pid
    last = max(processes)
    events._take_announced()
    assert events.timeline.watched(1_000) and not events.timeline.watched(last)
    events.watch([last])  # its first record, read by the main loop
    assert events.timeline.watched(last)
