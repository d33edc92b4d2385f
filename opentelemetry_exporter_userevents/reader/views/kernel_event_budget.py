# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""How many kernel events of one process the timeline takes, whatever the process does.

A process whose threads make a flood of kernel events (a syscall storm) must not take the
reader's CPU, nor the timeline's room, from a quiet app beside it: each process has a token
bucket of :data:`MAX_PROCESS_EVENTS` events, refilled at as many per second of the events'
own time (the kernel's stamps, so a capture fed at any speed is bounded alike). Past it, an
event of the process is counted and not added: its thread's timeline gets a gap from that
event to its next switch taken (its state is unknown meanwhile), so a span over the gap is
``partial`` with ``linux.kernel.unknown_ns``. A quiet process beside it is untouched. So
whatever a storm lasts, the timeline takes at most the bucket at once and the bucket per
second of it, from each process.

A thread is charged to its process once known, else to the thread that started it (a
``sched_process_fork``), else to itself: a process cannot escape its bucket by starting
threads or children.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

MAX_PROCESS_EVENTS = 100_000
"""Kernel events of one process the timeline takes at once, and per second of the events'
time: a busy service's syscalls (50,000 a second, each an entry and an exit), not a storm's
(a thread looping on a syscall makes millions). About 0.1 s of the reader's CPU on the
development host (``benchmarks/kernel_view_cost.py``: ~1 µs an event)."""
MAX_ACCOUNTS = 4096
"""Buckets kept (the least recently made forgotten first: a thread charged to one keeps
it; its count leaves the counts by process, not the total)."""
SHOWN_PROCESSES = 8
"""Processes named with their count in the summary and the health metrics, the most
dropped first (the rest summed)."""
_NS = 1_000_000_000


class EventAccount:
    """One bucket: what a process may still add, and what it could not."""

    __slots__ = ("key", "left", "since", "dropped", "empty", "closed")

    def __init__(self, key: Hashable, left: int) -> None:
        self.key = key
        self.left = left
        """Events it may add now."""
        self.since = -1
        """The event time (ns) it was last refilled at (-1: never, full)."""
        self.dropped = 0
        """Events not added: over the bucket."""
        self.empty = False
        """Found empty, not refilled since."""
        self.closed = False
        """Its process is left out of the kernel instance (:mod:`.kernel_pauses`): what
        still comes (a switch with a thread recorded, events recorded before) is dropped,
        so its threads stay unknown until it comes back."""


class EventBudget:
    """The buckets of the processes whose threads the timeline watches."""

    def __init__(self, per_process: int = MAX_PROCESS_EVENTS) -> None:
        self.per_process = per_process
        self.dropped = 0
        """Events not added, all processes."""
        self.on_empty: Callable[[EventAccount, int], None] | None = None
        """Called when a bucket is found empty (its first event dropped since it was last
        refilled), with that event's time: the live reader leaves its process out of the
        kernel instance at once (:mod:`.kernel_pauses`), even in the middle of a read."""
        self._accounts: dict[Hashable, EventAccount] = {}
        """Oldest first."""

    def account(self, key: Hashable) -> EventAccount:
        """The bucket of ``key`` (a process, or a thread whose process is not known)."""
        found = self._accounts.get(key)
        if found is None:
            found = self._accounts[key] = EventAccount(key, self.per_process)
            if len(self._accounts) > MAX_ACCOUNTS:
                del self._accounts[next(iter(self._accounts))]
        return found

    def refill(self, account: EventAccount, time: int) -> bool:
        """``account`` found empty at event time ``time``: refill it for the time since
        it was last; whether it may add the event now (if not, it is counted)."""
        if account.closed:
            account.dropped += 1
            self.dropped += 1
            return False
        if account.since < 0:
            account.since = time
        elif time > account.since:
            gained = (time - account.since) * self.per_process // _NS
            if gained > 0:
                account.left = min(self.per_process, account.left + gained)
                account.since = time
        if account.left > 0:
            account.left -= 1
            account.empty = False
            return True
        account.dropped += 1
        self.dropped += 1
        if not account.empty:
            account.empty = True
            if self.on_empty is not None:
                self.on_empty(account, time)
        return False

    def by_process(self) -> list[tuple[Hashable, int]]:
        """(process, events dropped), the most first, at most :data:`SHOWN_PROCESSES`;
        the rest as one ``(None, count)``."""
        counted = sorted(
            ((a.key, a.dropped) for a in self._accounts.values() if a.dropped),
            key=lambda item: -item[1],
        )
        shown = counted[:SHOWN_PROCESSES]
        rest = self.dropped - sum(count for _, count in shown)
        return shown + ([(None, rest)] if rest > 0 else [])
