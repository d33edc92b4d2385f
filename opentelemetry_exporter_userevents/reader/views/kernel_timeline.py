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
from collections import OrderedDict
from dataclasses import dataclass

from opentelemetry_exporter_userevents.abi.sched import (
    BLOCKED,
    ON_CPU,
    OTHER,
    SLEEPING,
    is_voluntary,
    switched_out_state,
)
from opentelemetry_exporter_userevents.reader.views.kernel_event_budget import (
    EventAccount,
    EventBudget,
)
from opentelemetry_exporter_userevents.reader.views.kernel_processes import ProcessKey
from opentelemetry_exporter_userevents.reader.views.kernel_sums import (
    DROPPED,
    WOKEN,
    ThreadSummary,
    Wait,
    state_of,
    summarize,
)

__all__ = ["KernelTimeline", "ThreadSummary", "Wait"]

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
"""And nanoseconds after its exit: longer than the join_stage holds a span for its resource
(11 s by default). A span enriched later says ``none``; past :data:`MAX_THREADS` an exited
thread is the first forgotten."""


class _Thread:
    __slots__ = (
        "times", "states", "wakers", "sys_enter", "sys_exit", "sys_name",
        "pending_syscall", "watched_from", "process", "exited_at", "gaps", "account",
    )  # fmt: skip

    def __init__(
        self, watched_from: int, process: ProcessKey | None, account: EventAccount
    ) -> None:
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
        self.account = account
        """The bucket its events are charged to (:mod:`.kernel_event_budget`)."""


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

    def __init__(
        self,
        max_threads: int = MAX_THREADS,
        max_events: int = MAX_EVENTS,
        budget: EventBudget | None = None,
    ) -> None:
        self.max_threads = max_threads
        self.max_events = max_events
        self.budget = budget or EventBudget()
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
                thread.account = self.budget.account(process)
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
        self._new(child, time, None, thread.account)  # its parent's bucket, until known

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
            if process.pid > 0:  # not UNKNOWN: a process of its own, its own bucket
                thread.account = self.budget.account(process)

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
        if thread is not None and thread.states and state_of(thread.states[-1]) in (
            SLEEPING, BLOCKED, OTHER,
        ):  # fmt: skip
            self._add(tid, time, WOKEN, waker)

    def syscall_enter(self, time: int, tid: int, name: str) -> None:
        thread = self._threads.get(tid)
        if thread is None:
            return
        if time < thread.watched_from:
            self.stats.before_watched += 1
            return
        account = thread.account
        if account.left > 0:
            account.left -= 1
        elif not self.budget.refill(account, time):
            self._over_budget(thread, time)
            return
        index = self._name_index.get(name)
        thread.pending_syscall = (time, self._name(name) if index is None else index)

    def syscall_exit(self, time: int, tid: int) -> None:
        thread = self._threads.get(tid)
        if thread is None:
            return
        account = thread.account  # charged even if its entry was not taken: its storm's
        if account.left > 0:
            account.left -= 1
        elif not self.budget.refill(account, time):
            self._over_budget(thread, time)
            return
        pending = thread.pending_syscall
        if pending is None:
            return
        entered = pending[0]
        thread.pending_syscall = None
        enters = thread.sys_enter
        if enters and entered < enters[-1]:
            self._disorder(thread, entered, enters[-1])
            return
        enters.append(entered)
        thread.sys_exit.append(time)
        thread.sys_name.append(pending[1])
        self._events += 1
        if self._events > self.max_events:
            self._trim()

    def _disorder(self, thread: _Thread, dropped: int, newest: int) -> None:
        self.stats.out_of_order += 1
        gaps = thread.gaps
        gaps.append((dropped, newest))
        if len(gaps) > MAX_GAPS:
            (a, b), (c, d) = gaps[0], gaps[1]
            gaps[:2] = [(min(a, c), max(b, d))]

    def threads_charged_to(self, account: EventAccount) -> list[int]:
        """The live threads whose events ``account`` pays for."""
        return [tid for tid, thread in self._threads.items()
                if thread.account is account and thread.exited_at is None]  # fmt: skip

    def mark_unknown(self, tids: list[int], time: int) -> None:
        """From ``time`` on, what these threads do is unknown until their next switch (their
        events are not recorded a while: :mod:`.kernel_pauses`)."""
        for tid in tids:
            thread = self._threads.get(tid)
            if thread is not None:
                self._over_budget(thread, time)

    def _over_budget(self, thread: _Thread, time: int) -> None:
        """An event of ``thread`` at ``time`` its process's bucket could not take: from
        then to its next switch taken, its state is unknown (a ``DROPPED`` mark), and its
        syscall under way is not known to end."""
        thread.pending_syscall = None
        times, states = thread.times, thread.states
        if states and states[-1] == DROPPED:
            return
        if times and time < times[-1]:  # out of order: what is known ends at the newest
            self._disorder(thread, time, times[-1])
            return
        times.append(time)
        states.append(DROPPED)
        thread.wakers.append(0)
        self._count(1)

    def _new(
        self, tid: int, since: int, process: ProcessKey | None, account: EventAccount | None = None
    ) -> None:
        """Watch ``tid``, charged to ``account`` (else its process's, else its own): a
        thread started by a watched one makes no bucket of its own, so a churner's threads
        do not push a paused process's bucket out of the budget's."""
        if len(self._threads) >= self.max_threads:
            oldest = next(iter(self._threads))
            self._forget(oldest)
            self.stats.threads_forgotten += 1
        if account is None:
            account = self.budget.account(process if process is not None else ("thread", tid))
        self._threads[tid] = _Thread(since, process, account)

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
        account = thread.account
        if account.left > 0:
            account.left -= 1
        elif not self.budget.refill(account, time):
            self._over_budget(thread, time)
            return
        if not thread.times and code not in (ON_CPU, WOKEN) and thread.watched_from <= time:
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

    def watched_since(self, tid: int, default: int) -> int:
        """Since when ``tid`` is known (``default`` if it is not watched)."""
        thread = self._threads.get(tid)
        return default if thread is None else thread.watched_from

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
        half = max(min(MAX_SCAN if budget is None else budget, MAX_SCAN), 0) // 2
        return summarize(thread, self.names, start, end, wait_threshold, half)


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
