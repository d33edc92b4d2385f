# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The kernel timeline's sums over an interval, from hand-made scheduler and syscall events
(the kernel test checks them against the kernel's own accounting)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.abi.sched import (
    BLOCKED,
    RUNNABLE,
    SLEEPING,
    TASK_REPORT_MAX,
    is_voluntary,
    switched_out_state,
)
from opentelemetry_exporter_userevents.reader.views.kernel_timeline import KernelTimeline

T = 42
OTHER_TID = 7
MS = 1_000_000


def test_prev_state_as_the_kernel_reports_it():
    assert switched_out_state(TASK_REPORT_MAX) == RUNNABLE  # R+: preempted
    assert switched_out_state(0) == RUNNABLE  # R: yielded
    assert switched_out_state(0x1) == SLEEPING
    assert switched_out_state(0x2) == BLOCKED
    assert switched_out_state(0x80) == BLOCKED  # I
    assert not is_voluntary(TASK_REPORT_MAX) and not is_voluntary(0)
    assert is_voluntary(0x1) and is_voluntary(0x2)


def _sleeper() -> KernelTimeline:
    """On the CPU from 0; asleep in futex from 10 ms, woken by 99 at 50, back on at 52; off
    again (preempted) at 80, back at 81."""
    timeline = KernelTimeline()
    timeline.watch(T, 0)
    timeline.switch(1 * MS, OTHER_TID, 0x1, T)
    timeline.syscall_enter(9 * MS, T, "futex")
    timeline.switch(10 * MS, T, 0x1, OTHER_TID)
    timeline.wakeup(50 * MS, T, 99)
    timeline.switch(52 * MS, OTHER_TID, 0x1, T)
    timeline.syscall_exit(53 * MS, T)
    timeline.switch(80 * MS, T, TASK_REPORT_MAX, OTHER_TID)
    timeline.switch(81 * MS, OTHER_TID, 0x1, T)
    return timeline


def test_a_span_is_split_into_on_cpu_and_off_cpu_by_why():
    summary = _sleeper().summary(T, 5 * MS, 90 * MS, wait_threshold=1 * MS)
    assert summary is not None
    assert summary.on_cpu == (10 - 5 + 80 - 52 + 90 - 81) * MS
    assert summary.off_cpu == {SLEEPING: 40 * MS, RUNNABLE: 3 * MS}
    assert (summary.voluntary, summary.involuntary) == (1, 1)
    assert summary.syscalls == {"futex": [1, 44 * MS]}
    assert not summary.partial and summary.unknown == 0
    sleep, preempted = summary.waits
    assert (sleep.start, sleep.duration, sleep.state) == (10 * MS, 42 * MS, SLEEPING)
    assert (sleep.runnable, sleep.syscall, sleep.waker) == (2 * MS, "futex", 99)
    assert (preempted.duration, preempted.state, preempted.syscall) == (MS, RUNNABLE, None)


def test_an_interval_that_starts_off_the_cpu_keeps_why_it_left():
    summary = _sleeper().summary(T, 30 * MS, 51 * MS, wait_threshold=0)
    assert summary is not None
    assert summary.off_cpu == {SLEEPING: 20 * MS, RUNNABLE: 1 * MS}
    (wait,) = summary.waits
    assert (wait.start, wait.state, wait.syscall, wait.waker) == (30 * MS, SLEEPING, "futex", 99)
    assert summary.syscalls == {"futex": [1, 21 * MS]}


def test_waits_under_the_threshold_are_summed_not_listed():
    summary = _sleeper().summary(T, 0, 90 * MS, wait_threshold=2 * MS)
    assert summary is not None
    assert [w.duration for w in summary.waits] == [42 * MS]
    assert summary.off_cpu[RUNNABLE] == 3 * MS


def test_before_the_thread_was_watched_is_unknown_and_partial():
    timeline = KernelTimeline()
    timeline.watch(T, 20 * MS)
    timeline.switch(30 * MS, T, 0x1, OTHER_TID)  # first event: it was on the CPU since 20
    summary = timeline.summary(T, 10 * MS, 40 * MS, 0)
    assert summary is not None and summary.partial
    assert (summary.unknown, summary.on_cpu, summary.off_cpu) == (
        10 * MS, 10 * MS, {SLEEPING: 10 * MS},
    )  # fmt: skip
    assert timeline.summary(OTHER_TID, 0, 1, 0) is None  # never watched


def test_a_thread_that_spins_with_no_event_in_its_span_is_on_the_cpu():
    timeline = KernelTimeline()
    timeline.watch(T, 0)
    timeline.switch(1 * MS, OTHER_TID, 0x1, T)
    summary = timeline.summary(T, 10 * MS, 500 * MS, 0)
    assert summary is not None and summary.on_cpu == 490 * MS and not summary.partial


def test_memory_is_bounded_and_what_is_forgotten_makes_spans_partial():
    timeline = KernelTimeline(max_threads=2, max_events=100)
    for tid in (1, 2, 3):
        timeline.watch(tid, 0)
    assert not timeline.watched(1) and timeline.stats.threads_forgotten == 1
    for n in range(1, 200):
        timeline.switch(n * 2 * MS, 2, 0x1, 3)
        timeline.switch(n * 2 * MS + MS, 3, 0x1, 2)
    assert timeline.stats.trims >= 1
    summary = timeline.summary(2, 0, 10 * MS, 0)
    assert summary is not None and summary.partial


def test_events_out_of_order_are_counted_and_dropped_and_spans_over_them_are_partial():
    timeline = KernelTimeline()
    timeline.watch(T, 0)
    timeline.switch(1 * MS, OTHER_TID, 0x1, T)
    timeline.switch(10 * MS, OTHER_TID, 0x1, T)  # back on the CPU, read first
    timeline.switch(5 * MS, T, TASK_REPORT_MAX, OTHER_TID)  # preempted before: read later
    assert timeline.stats.out_of_order == 1
    over = timeline.summary(T, 4 * MS, 12 * MS, 0)
    assert over is not None and over.partial  # its on-CPU time holds the preemption
    after = timeline.summary(T, 11 * MS, 12 * MS, 0)
    assert after is not None and not after.partial
    for n in range(20):  # more such: the oldest merged, never more than the bound
        timeline.switch(100 * MS + n * 10, OTHER_TID, 0x1, T)
        timeline.switch(100 * MS + n * 10 - 5, T, TASK_REPORT_MAX, OTHER_TID)
    assert timeline.stats.out_of_order == 21
    still = timeline.summary(T, 4 * MS, 6 * MS, 0)
    assert still is not None and still.partial


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # switch out, switch in, wake-up, syscall
            st.integers(0, 1_000),
            st.sampled_from([0, 0x1, 0x2, 0x4, 0x80, TASK_REPORT_MAX, -1, 1 << 40]),
            st.sampled_from([T, OTHER_TID, 0, -5]),
        ),
        max_size=60,
    ),
    st.integers(0, 60_000),
    st.integers(0, 60_000),
)
def test_any_event_sequence_sums_to_the_interval(events, start, length):
    """Whatever a stream of events says (a hostile thread shapes its own), the parts of an
    interval add up to it and nothing is negative."""
    timeline = KernelTimeline()
    timeline.watch(T, 0)
    now = 0
    for kind, step, state, tid in events:
        now += step
        if kind == 0:
            timeline.switch(now, tid, state, OTHER_TID)
        elif kind == 1:
            timeline.switch(now, OTHER_TID, state, tid)
        elif kind == 2:
            timeline.wakeup(now, tid, OTHER_TID)
        elif step % 2:
            timeline.syscall_enter(now, tid, "read")
        else:
            timeline.syscall_exit(now, tid)
    summary = timeline.summary(T, start, start + length, 0)
    assert summary is not None
    parts = [summary.on_cpu, summary.unknown, *summary.off_cpu.values()]
    assert all(part >= 0 for part in parts)
    assert sum(parts) == length
    assert all(0 <= w.runnable <= w.duration <= length for w in summary.waits)
    assert all(count >= 1 and 0 <= ns <= length for count, ns in summary.syscalls.values())


def test_a_span_that_claims_a_huge_interval_costs_a_bounded_scan(monkeypatch):
    monkeypatch.setattr(
        "opentelemetry_exporter_userevents.reader.views.kernel_timeline.MAX_SCAN", 10
    )
    timeline = KernelTimeline()
    timeline.watch(T, 0)
    for n in range(1, 50):
        timeline.switch(n * 2 * MS, T, 0x1, OTHER_TID)
        timeline.switch(n * 2 * MS + MS, OTHER_TID, 0x1, T)
    summary = timeline.summary(T, 0, 10**15, 0)
    assert summary is not None and summary.partial
    assert summary.voluntary <= 6
    assert summary.on_cpu + summary.unknown + sum(summary.off_cpu.values()) == 10**15
