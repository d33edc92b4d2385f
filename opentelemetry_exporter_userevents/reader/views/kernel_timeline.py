# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What each watched thread did in the kernel, kept as a timeline, and summed over a span.

Fed scheduler switches and wake-ups and completed syscalls (times already on the spans'
clock: wall-clock nanoseconds), it answers for one thread and one interval: time on the
CPU, time off it by why (runnable, sleeping, blocked, other), switches (voluntary and
involuntary), syscalls by name, and each wait off the CPU with the syscall it was made in
and who woke the thread. It reads no files (:mod:`.kernel_events` feeds it).

Memory is bounded whatever the threads do: at most :data:`MAX_THREADS` threads (the one
touched longest ago forgotten first, in constant time) and :data:`MAX_EVENTS` transitions
and syscalls in all; past that the threads holding the most forget their oldest half. A
thread that exits (``sched_process_exit``) is forgotten :data:`EXIT_GRACE_READS` reads and
:data:`EXIT_GRACE_NS` later, once the spans it wrote before it exited are in. A thread's
``watched_from`` is the time of its oldest event kept, or when it was first watched: an
interval that starts before it is summed over what is known and called partial, and an
event older than it (a former thread of the same tid) is dropped. Each thread knows its
process (:class:`.ProcessKey`) once it is looked up: a thread of another process with the
same tid is a new thread.

A span may claim any interval: a sum reads at most :data:`MAX_SCAN` events, or the budget
it is given, and the rest of the interval is unknown.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field

from opentelemetry_exporter_userevents.abi.sched import (
    BLOCKED,
    ON_CPU,
    OTHER,
    RUNNABLE,
    SLEEPING,
    is_voluntary,
    switched_out_state,
)
from opentelemetry_exporter_userevents.reader.views.kernel_processes import ProcessKey

MAX_THREADS = 4096
"""Threads kept (an exited one forgotten first, then the least recently touched)."""
MAX_EVENTS = 2_000_000
"""Transitions and syscalls kept, all threads together (about 25 bytes each)."""
MAX_SCAN = 4096
"""Events (transitions and syscalls, half each) of one thread summed for one interval at
most: a few ms of the reader's CPU, whatever interval a span claims."""
MAX_GAPS = 8
"""Intervals kept per thread in which one of its events came out of order (read after a
later one: dropped); past that the two oldest are merged. A span overlapping one is
partial."""
EXIT_GRACE_READS = 3
"""Reads an exited thread is kept for at least: its last spans' records are read before
the kernel events that say it exited, or at the next read."""
EXIT_GRACE_NS = 15_000_000_000
"""And nanoseconds after its exit: longer than the rebuilder holds a span for its resource
(11 s by default). A span enriched later says ``none``; past :data:`MAX_THREADS` an exited
thread is the first forgotten."""
_UNKNOWN = -1
_WOKEN = 5
"""The code of a wake-up (the thread becomes RUNNABLE) in a thread's ``states``."""


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


class _Thread:
    __slots__ = (
        "times", "states", "wakers", "sys_enter", "sys_exit", "sys_name",
        "pending_syscall", "watched_from", "process", "exited_at", "gaps",
    )  # fmt: skip

    def __init__(self, watched_from: int, process: ProcessKey | None) -> None:
        self.times = array("q")
        self.states = array("b")
        """The state entered at each time; a switch out stores -(state + 1) when voluntary
        (so a switch's kind is kept in the same byte)."""
        self.wakers = array("i")
        self.sys_enter = array("q")
        self.sys_exit = array("q")
        self.sys_name = array("H")
        self.pending_syscall: tuple[int, int] | None = None
        self.watched_from = watched_from
        self.process = process
        """Its process, once looked up (a thread a fork event watched is not yet)."""
        self.exited_at: int | None = None
        self.gaps: list[tuple[int, int]] = []
        """From an event dropped out of order to the newest kept then: not known whole."""
        """When it exited: after that, what the timeline knows of its tid is unknown."""


@dataclass
class TimelineStats:
    threads_forgotten: int = 0
    """Threads forgotten to make room (the bound reached), not by their exit."""
    threads_exited: int = 0
    """Threads forgotten after their exit."""
    threads_replaced: int = 0
    """Threads whose tid was taken by a new thread or process before their exit was read."""
    before_watched: int = 0
    """Events older than their thread's ``watched_from`` (a former thread of that tid)."""
    trims: int = 0
    """Times every thread forgot its oldest half (the event bound was reached)."""
    out_of_order: int = 0
    """Events older than the thread's newest, dropped (they would reorder its timeline); a
    span over one is partial."""


class KernelTimeline:
    """Per-thread timelines of scheduler states and syscalls."""

    def __init__(self, max_threads: int = MAX_THREADS, max_events: int = MAX_EVENTS) -> None:
        self.max_threads = max_threads
        self.max_events = max_events
        self.stats = TimelineStats()
        self.names: list[str] = []
        self._name_index: dict[str, int] = {}
        self._threads: OrderedDict[int, _Thread] = OrderedDict()
        """Least recently touched first."""
        self._exits: OrderedDict[int, tuple[int, int]] = OrderedDict()
        """Exited threads -> (the read that saw the exit, its time), oldest first."""
        self._events = 0
        self._reads = 0

    # --- feeding --------------------------------------------------------------------

    def watch(self, tid: int, since: int, process: ProcessKey | None = None) -> None:
        """``tid`` is watched from ``since`` on (what came before is unknown), as a thread
        of ``process`` if known. A thread kept under that tid that exited, or is another
        process's, is replaced."""
        thread = self._threads.get(tid)
        if thread is not None and (
            thread.exited_at is not None
            or (process is not None and thread.process not in (None, process))
        ):
            self._forget(tid)
            self.stats.threads_replaced += thread.exited_at is None
            thread = None
        if thread is None:
            self._new(tid, since, process)
        else:
            if process is not None:
                thread.process = process
            self._threads.move_to_end(tid)

    def fork(self, time: int, parent: int, child: int) -> None:
        """A ``sched_process_fork``: a watched thread started ``child`` (a thread or a
        process: looked up when it matters), watched from now; a thread of that tid kept
        from before is another, whose exit was missed."""
        thread = self._threads.get(parent)
        if thread is None or thread.exited_at is not None:
            return
        if child in self._threads:
            self.stats.threads_replaced += self._threads[child].exited_at is None
            self._forget(child)
        self._threads.move_to_end(parent)
        self._new(child, time, None)

    def exit(self, time: int, tid: int) -> ProcessKey | None:
        """A ``sched_process_exit``: ``tid`` is forgotten :data:`EXIT_GRACE_READS` reads and
        :data:`EXIT_GRACE_NS` from now; its process, when known."""
        thread = self._threads.get(tid)
        if thread is None or thread.exited_at is not None or time < thread.watched_from:
            return None
        thread.exited_at = time
        self._exits[tid] = (self._reads, time)
        self._threads.move_to_end(tid, last=False)  # the first to go if room is needed
        return thread.process

    def next_read(self, now: int) -> None:
        """A read of the kernel's events begins (at ``now``, on the spans' clock): forget
        the threads that exited :data:`EXIT_GRACE_READS` reads and :data:`EXIT_GRACE_NS`
        ago."""
        self._reads += 1
        exits = self._exits
        while exits:
            tid, (read, when) = next(iter(exits.items()))
            if read > self._reads - EXIT_GRACE_READS or when > now - EXIT_GRACE_NS:
                break
            self._forget(tid)
            self.stats.threads_exited += 1

    def process(self, tid: int, live: bool = False) -> ProcessKey | None:
        """The process of a watched thread, when it is known (``live``: and the thread has
        not exited, so the tid is still its)."""
        thread = self._threads.get(tid)
        if thread is None or (live and thread.exited_at is not None):
            return None
        return thread.process

    def set_process(self, tid: int, process: ProcessKey) -> None:
        thread = self._threads.get(tid)
        if thread is not None:
            thread.process = process

    def switch(self, time: int, prev_tid: int, prev_state: int, next_tid: int) -> None:
        """A ``sched_switch``: ``prev_tid`` left the CPU in ``prev_state``, ``next_tid`` got it."""
        if prev_tid in self._threads:
            state = switched_out_state(prev_state)
            code = -(state + 1) if is_voluntary(prev_state) else state
            self._add(prev_tid, time, code, 0)
        if next_tid in self._threads:
            self._add(next_tid, time, ON_CPU, 0)

    def wakeup(self, time: int, tid: int, waker: int) -> None:
        """A ``sched_wakeup``: ``tid`` became runnable, woken by ``waker``."""
        thread = self._threads.get(tid)
        if thread is not None and thread.states and _state(thread.states[-1]) in (
            SLEEPING, BLOCKED, OTHER,
        ):  # fmt: skip
            self._add(tid, time, _WOKEN, waker)

    def syscall_enter(self, time: int, tid: int, name: str) -> None:
        thread = self._threads.get(tid)
        if thread is None:
            return
        if time < thread.watched_from:
            self.stats.before_watched += 1
            return
        thread.pending_syscall = (time, self._name(name))

    def syscall_exit(self, time: int, tid: int) -> None:
        thread = self._threads.get(tid)
        if thread is None or thread.pending_syscall is None:
            return
        entered, name = thread.pending_syscall
        thread.pending_syscall = None
        if thread.sys_enter and entered < thread.sys_enter[-1]:
            self._disorder(thread, entered, thread.sys_enter[-1])
            return
        thread.sys_enter.append(entered)
        thread.sys_exit.append(time)
        thread.sys_name.append(name)
        self._count(1)

    def _disorder(self, thread: _Thread, dropped: int, newest: int) -> None:
        self.stats.out_of_order += 1
        gaps = thread.gaps
        gaps.append((dropped, newest))
        if len(gaps) > MAX_GAPS:
            (a, b), (c, d) = gaps[0], gaps[1]
            gaps[:2] = [(min(a, c), max(b, d))]

    def _new(self, tid: int, since: int, process: ProcessKey | None) -> None:
        if len(self._threads) >= self.max_threads:
            oldest = next(iter(self._threads))
            self._forget(oldest)
            self.stats.threads_forgotten += 1
        self._threads[tid] = _Thread(since, process)

    def _forget(self, tid: int) -> None:
        thread = self._threads.pop(tid, None)
        if thread is not None:
            self._events -= _size(thread)
            self._exits.pop(tid, None)

    def _add(self, tid: int, time: int, code: int, waker: int) -> None:
        thread = self._threads[tid]
        if time < thread.watched_from:
            self.stats.before_watched += 1
            return
        if thread.times and time < thread.times[-1]:
            self._disorder(thread, time, thread.times[-1])
            return
        if not thread.times and code not in (ON_CPU, _WOKEN) and thread.watched_from <= time:
            # Its first event is a switch out: it was on the CPU since it was watched.
            thread.times.append(thread.watched_from)
            thread.states.append(ON_CPU)
            thread.wakers.append(0)
            self._events += 1
        thread.times.append(time)
        thread.states.append(code)
        thread.wakers.append(waker)
        self._threads.move_to_end(tid)
        self._count(1)

    def _count(self, added: int) -> None:
        self._events += added
        if self._events > self.max_events:
            self._trim()

    def _trim(self) -> None:
        """The threads holding the most (at least the average) forget their oldest half,
        until all hold 3/4 of the bound at most: a thread with few events keeps them,
        whatever a busy one does. A pass halves at least the largest (8 passes at most)."""
        self.stats.trims += 1
        for _ in range(8):
            if self._events <= self.max_events * 3 // 4 or not self._threads:
                break
            average = max(self._events // len(self._threads), 2)
            for thread in self._threads.values():
                size = _size(thread)
                if size >= average:
                    _halve(thread)
                    self._events -= size - _size(thread)

    def _name(self, name: str) -> int:
        index = self._name_index.get(name)
        if index is None:
            index = self._name_index[name] = len(self.names)
            self.names.append(name)
        return index

    # --- asking ---------------------------------------------------------------------

    def watched(self, tid: int) -> bool:
        return tid in self._threads

    def summary(
        self, tid: int, start: int, end: int, wait_threshold: int, budget: int | None = None
    ) -> ThreadSummary | None:
        """What ``tid`` did in ``[start, end]``; None if it is not watched. Waits off the CPU
        of at least ``wait_threshold`` ns (inside the interval) are listed. At most
        ``budget`` events are summed (:data:`MAX_SCAN` at most, half of each kind): the
        interval past them is unknown (so one record costs the reader little)."""
        thread = self._threads.get(tid)
        if thread is None or end < start:
            return None
        result = ThreadSummary()
        half = max(min(MAX_SCAN if budget is None else budget, MAX_SCAN), 0) // 2
        times, enters = thread.times, thread.sys_enter
        last = end if thread.exited_at is None else max(min(end, thread.exited_at), start)
        known = last
        first_state = bisect_right(times, start)
        if len(times) - first_state > half and times[first_state + half] < last:
            last = times[first_state + half]
        first_call = bisect_left(enters, start)
        if len(enters) - first_call > half and enters[first_call + half] < last:
            last = enters[first_call + half]
        self._sum_states(thread, start, last, wait_threshold, result)
        self._sum_syscalls(thread, start, last, result)
        result.unknown += end - last
        result.cut = last < known
        result.partial = (
            start < thread.watched_from
            or result.unknown > 0
            or any(a <= end and start <= b for a, b in thread.gaps)
        )
        result.scanned = (bisect_right(times, last) - first_state) + (
            bisect_right(enters, last) - first_call
        )
        return result

    def _sum_states(
        self, thread: _Thread, start: int, end: int, threshold: int, out: ThreadSummary
    ) -> None:
        times, states, wakers = thread.times, thread.states, thread.wakers
        first = bisect_right(times, start)
        # The state at ``start``: the one entered last before it, if known.
        state = _state(states[first - 1]) if first else _UNKNOWN
        at = start
        if state == _UNKNOWN and thread.watched_from > start:
            out.unknown += min(thread.watched_from, end) - start
            at = min(thread.watched_from, end)
        wait: Wait | None = None
        if state not in (ON_CPU, _UNKNOWN):
            out_index = first - 1
            while out_index > 0 and states[out_index] == _WOKEN:
                out_index -= 1
            left = times[out_index]
            waker = wakers[first - 1] if states[first - 1] == _WOKEN else 0
            wait = Wait(max(left, start), 0, _state(states[out_index]), 0,
                        self._syscall_at(thread, left), waker or None)  # fmt: skip
        index = first
        while index < len(times) and times[index] <= end:
            time, code = times[index], states[index]
            self._credit(out, state, time - at, wait)
            at = time
            new_state = _state(code)
            if code == _WOKEN:
                if wait is not None:
                    wait.waker = wakers[index] or None
            elif new_state == ON_CPU:
                if wait is not None:
                    self._close_wait(out, wait, threshold)
                    wait = None
            elif state == ON_CPU or state == _UNKNOWN:
                if code < 0:
                    out.voluntary += 1
                else:
                    out.involuntary += 1
                wait = Wait(time, 0, new_state, 0, self._syscall_at(thread, time), None)
            state = new_state
            index += 1
        self._credit(out, state, end - at, wait)
        if wait is not None:
            self._close_wait(out, wait, threshold)

    @staticmethod
    def _credit(out: ThreadSummary, state: int, duration: int, wait: Wait | None) -> None:
        if duration <= 0:
            return
        if state == ON_CPU:
            out.on_cpu += duration
        elif state == _UNKNOWN:
            out.unknown += duration
        else:
            out.off_cpu[state] = out.off_cpu.get(state, 0) + duration
            if wait is not None:
                wait.duration += duration
                if state == RUNNABLE:
                    wait.runnable += duration

    @staticmethod
    def _close_wait(out: ThreadSummary, wait: Wait, threshold: int) -> None:
        if wait.duration >= threshold:
            out.waits.append(wait)

    def _syscall_at(self, thread: _Thread, time: int) -> str | None:
        """The syscall ``thread`` was in at ``time``, if it is known."""
        index = bisect_right(thread.sys_enter, time) - 1
        if index >= 0 and thread.sys_exit[index] >= time:
            return self.names[thread.sys_name[index]]
        pending = thread.pending_syscall
        if pending is not None and pending[0] <= time:
            return self.names[pending[1]]
        return None

    def _sum_syscalls(self, thread: _Thread, start: int, end: int, out: ThreadSummary) -> None:
        enters, exits, names = thread.sys_enter, thread.sys_exit, thread.sys_name
        # A syscall counts if it ran at all inside the interval; its time is clipped to it.
        index = max(bisect_left(enters, start) - 1, 0)
        while index < len(enters) and enters[index] <= end:
            entered, exited = enters[index], exits[index]
            if exited >= start:
                inside = min(exited, end) - max(entered, start)
                tally = out.syscalls.setdefault(self.names[names[index]], [0, 0])
                tally[0] += 1
                tally[1] += max(inside, 0)
            index += 1
        pending = thread.pending_syscall
        if pending is not None and pending[0] <= end:  # still in it when the span ended
            tally = out.syscalls.setdefault(self.names[pending[1]], [0, 0])
            tally[0] += 1
            tally[1] += end - max(pending[0], start)


def _state(code: int) -> int:
    if code < 0:
        return -code - 1
    return RUNNABLE if code == _WOKEN else code


def _halve(thread: _Thread) -> None:
    """``thread`` forgets its oldest half (and is known from the oldest event kept)."""
    half = len(thread.times) // 2
    if half:
        thread.watched_from = max(thread.watched_from, thread.times[half])
        del thread.times[:half], thread.states[:half], thread.wakers[:half]
    half = len(thread.sys_enter) // 2
    if half:
        thread.watched_from = max(thread.watched_from, thread.sys_enter[half])
        del thread.sys_enter[:half], thread.sys_exit[:half], thread.sys_name[:half]


def _size(thread: _Thread) -> int:
    return len(thread.times) + len(thread.sys_enter)
