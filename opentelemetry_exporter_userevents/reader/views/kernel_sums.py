# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""One thread's timeline summed over one interval: what :meth:`.KernelTimeline.summary`
answers for a span.

A span is summed once, when it is rebuilt, so this runs once per span: each index is found
once (a bisection), and the walk over the interval's transitions and syscalls credits
local sums, with no call per event. At most ``budget`` events are summed (half of each
kind); the interval past them is unknown.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opentelemetry_exporter_userevents.abi.sched import ON_CPU, RUNNABLE

if TYPE_CHECKING:
    from opentelemetry_exporter_userevents.reader.views.kernel_timeline import _Thread

UNKNOWN_STATE = -1
"""The state before the oldest event known."""
WOKEN = 5
"""The code of a wake-up (the thread becomes RUNNABLE) in a thread's ``states``."""
DROPPED = 6
"""The code of an event its process's bucket could not take (:mod:`.kernel_event_budget`):
the thread's state is unknown from then to its next transition."""


@dataclass
class Wait:
    """One stretch off the CPU, as much of it as lies in the interval asked about."""

    start: int
    """When it left the CPU (or the interval's start)."""
    duration: int
    state: int
    """Why it left: RUNNABLE (preempted), SLEEPING, BLOCKED, OTHER."""
    runnable: int
    """Of ``duration``, the time between its wake-up and getting a CPU back."""
    syscall: str | None
    """The syscall it was in when it left, if any."""
    waker: int | None
    """The thread that woke it (the wake-up's ``common_pid``), if seen."""


@dataclass
class ThreadSummary:
    """What one thread did in the kernel during an interval."""

    on_cpu: int = 0
    off_cpu: dict[int, int] = field(default_factory=dict)
    """Nanoseconds per off-CPU state (RUNNABLE, SLEEPING, BLOCKED, OTHER)."""
    unknown: int = 0
    """Nanoseconds before the thread was watched, or before its oldest event kept."""
    voluntary: int = 0
    involuntary: int = 0
    syscalls: dict[str, list[int]] = field(default_factory=dict)
    """Name -> [count, nanoseconds inside the interval]."""
    waits: list[Wait] = field(default_factory=list)
    partial: bool = False
    """The interval starts before what the timeline knows of the thread, or reaches past
    the events the budget let it sum (``unknown`` says how much)."""
    scanned: int = 0
    """Events summed: what the sum cost."""
    cut: bool = False
    """The budget ended the sum before the interval's end."""


def state_of(code: int) -> int:
    """The state a code of a thread's ``states`` enters."""
    if code < 0:
        return -code - 1
    if code == DROPPED:
        return UNKNOWN_STATE
    return RUNNABLE if code == WOKEN else code


def summarize(
    thread: _Thread, names: list[str], start: int, end: int, threshold: int, half: int
) -> ThreadSummary:
    """``thread`` over ``[start, end]`` (``end >= start``), at most ``half`` transitions
    and ``half`` syscalls; ``names``: the syscall names by index."""
    result = ThreadSummary()
    times, enters = thread.times, thread.sys_enter
    last = end if thread.exited_at is None else max(min(end, thread.exited_at), start)
    known = last
    first_state = bisect_right(times, start)
    if len(times) - first_state > half and times[first_state + half] < last:
        last = times[first_state + half]
    first_call = bisect_left(enters, start)
    if len(enters) - first_call > half and enters[first_call + half] < last:
        last = enters[first_call + half]
    states_end = _sum_states(thread, names, first_state, start, last, threshold, result)
    calls_end = _sum_syscalls(thread, names, first_call, start, last, result)
    result.unknown += end - last
    result.cut = last < known
    result.partial = (
        start < thread.watched_from
        or result.unknown > 0
        or bool(thread.gaps and any(a <= end and start <= b for a, b in thread.gaps))
    )
    result.scanned = (states_end - first_state) + (calls_end - first_call)
    return result


def _sum_states(
    thread: _Thread,
    names: list[str],
    first: int,
    start: int,
    end: int,
    threshold: int,
    out: ThreadSummary,
) -> int:
    """Credit the states over ``[start, end]`` (``first``: the first transition after
    ``start``); the index past the last transition summed."""
    times, states, wakers = thread.times, thread.states, thread.wakers
    # The state at ``start``: the one entered last before it, if known.
    state = state_of(states[first - 1]) if first else UNKNOWN_STATE
    at = start
    unknown = 0
    if state == UNKNOWN_STATE and thread.watched_from > start:
        unknown = min(thread.watched_from, end) - start
        at = min(thread.watched_from, end)
    wait: Wait | None = None
    if state != ON_CPU and state != UNKNOWN_STATE:
        out_index = first - 1
        while out_index > 0 and states[out_index] == WOKEN:
            out_index -= 1
        left = times[out_index]
        waker = wakers[first - 1] if states[first - 1] == WOKEN else 0
        wait = Wait(max(left, start), 0, state_of(states[out_index]), 0,
                    syscall_at(thread, names, left), waker or None)  # fmt: skip
    on_cpu = 0
    off_cpu = out.off_cpu
    index = first
    count = len(times)
    while index < count:
        time = times[index]
        if time > end:
            break
        duration = time - at
        if duration > 0:  # credit the state left
            if state == ON_CPU:
                on_cpu += duration
            elif state == UNKNOWN_STATE:
                unknown += duration
            else:
                off_cpu[state] = off_cpu.get(state, 0) + duration
                if wait is not None:
                    wait.duration += duration
                    if state == RUNNABLE:
                        wait.runnable += duration
        at = time
        code = states[index]
        new_state = state_of(code)
        if code == WOKEN:
            if wait is not None:
                wait.waker = wakers[index] or None
        elif new_state == ON_CPU or code == DROPPED:
            if wait is not None:
                if wait.duration >= threshold:
                    out.waits.append(wait)
                wait = None
        elif state == ON_CPU or state == UNKNOWN_STATE:
            if code < 0:
                out.voluntary += 1
            else:
                out.involuntary += 1
            wait = Wait(time, 0, new_state, 0, syscall_at(thread, names, time), None)
        state = new_state
        index += 1
    duration = end - at
    if duration > 0:
        if state == ON_CPU:
            on_cpu += duration
        elif state == UNKNOWN_STATE:
            unknown += duration
        else:
            off_cpu[state] = off_cpu.get(state, 0) + duration
            if wait is not None:
                wait.duration += duration
                if state == RUNNABLE:
                    wait.runnable += duration
    if wait is not None and wait.duration >= threshold:
        out.waits.append(wait)
    out.on_cpu += on_cpu
    out.unknown += unknown
    return index


def syscall_at(thread: _Thread, names: list[str], time: int) -> str | None:
    """The syscall ``thread`` was in at ``time``, if it is known."""
    index = bisect_right(thread.sys_enter, time) - 1
    if index >= 0 and thread.sys_exit[index] >= time:
        return names[thread.sys_name[index]]
    pending = thread.pending_syscall
    if pending is not None and pending[0] <= time:
        return names[pending[1]]
    return None


def _sum_syscalls(
    thread: _Thread, names: list[str], first: int, start: int, end: int, out: ThreadSummary
) -> int:
    """Count the syscalls that ran inside ``[start, end]``, their time clipped to it
    (``first``: the first that entered at ``start`` or after); the index past the last."""
    enters, exits, indexes = thread.sys_enter, thread.sys_exit, thread.sys_name
    tallies: dict[int, list[int]] = {}
    index = max(first - 1, 0)
    count = len(enters)
    while index < count:
        entered = enters[index]
        if entered > end:
            break
        exited = exits[index]
        if exited >= start:
            tally = tallies.get(indexes[index])
            if tally is None:
                tally = tallies[indexes[index]] = [0, 0]
            tally[0] += 1
            inside = (exited if exited < end else end) - (entered if entered > start else start)
            if inside > 0:
                tally[1] += inside
        index += 1
    syscalls = out.syscalls
    for name, tally in tallies.items():
        syscalls[names[name]] = tally
    pending = thread.pending_syscall
    if pending is not None and pending[0] <= end:  # still in it when the span ended
        tally = syscalls.setdefault(names[pending[1]], [0, 0])
        tally[0] += 1
        tally[1] += end - max(pending[0], start)
    return index
