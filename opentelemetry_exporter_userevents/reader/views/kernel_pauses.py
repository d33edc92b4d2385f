# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Processes over their budget of kernel events, left out of the kernel instance a while.

The budget (:mod:`.kernel_event_budget`) bounds what a storm adds to the timeline, but the
reader would still read and decode each of its events, and a storm makes events faster
than any reader decodes them: the instance's buffer would overflow and every process's
spans would be partial. So a process over its budget has its threads written to the
instance's ``set_event_notrace_pid`` (Linux 5.8+): the kernel stops recording them (and,
with ``options/event-fork``, the threads they start) at once, and the reader pays nothing
for them. After :data:`PAUSE_NS` the list is written again without them: their events are
recorded again, charged to a bucket that refilled meanwhile; a process over its budget again
soon after is left out twice as long each time (:data:`MAX_PAUSE_NS`). Their timelines have
a gap over the pause (:meth:`.KernelTimeline.mark_unknown`), so their spans over it are
partial.

If the kernel refuses the list (no such file before 5.8), the pause is counted as failed
and the budget still drops the storm's events in the reader.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

PAUSE_NS = 1_000_000_000
"""How long a process over its budget is left out the first time: a second, what its bucket
refills in."""
MAX_PAUSE_NS = 64_000_000_000
"""Each time it is over its budget again within a pause's length of coming back, it is left
out twice as long, up to this: the reader is behind a storm by what the kernel recorded
before the pause (it decodes that still), and must catch up before the storm is recorded
again, or the instance's buffer overflows and every process's spans are partial."""
MAX_PAUSED_THREADS = 16_384
"""Threads left out at once at most (the list is written whole at each change); a process
past it is not left out, and its bucket still bounds what the timeline takes."""
CAUGHT_UP = 2048
"""A process comes back once its pause is over and the reader's last read of the instance
had fewer events than this (about 20 pages): the reader has caught up with what the kernel
recorded before the pause, so the storm's next burst is seen, and left out, in a read or
two, before it can fill the buffer."""
MAX_BACK = 4096
"""Processes brought back whose last pause is remembered (to double the next)."""


class Pauses:
    """The processes left out now, and when each comes back."""

    def __init__(self, write: Callable[[list[int]], None]) -> None:
        """``write``: replaces the instance's ``set_event_notrace_pid`` (OSError if not)."""
        self._write = write
        self.paused: dict[Hashable, tuple[int, int, list[int]]] = {}
        """Process -> (when it comes back, span clock ns; how long it is out; its threads)."""
        self._back: dict[Hashable, tuple[int, int]] = {}
        """Process brought back -> (when, how long it was out), the last :data:`MAX_BACK`."""
        self.count = 0
        """Pauses made."""
        self.failed = 0
        """Writes the kernel refused."""
        self._retry_at = 0
        """After a refused write, no pause is tried before this time (a bucket found empty
        again at each event refilled must not cost a write each)."""

    def pause(self, key: Hashable, tids: list[int], now: int) -> bool:
        """Leave the threads ``tids`` of process ``key`` out from ``now`` (span clock ns),
        :data:`PAUSE_NS`, or twice its last pause if it came back less than that long ago;
        whether they are."""
        if key in self.paused or not tids or now < self._retry_at:
            return False
        listed = [tid for _, _, threads in self.paused.values() for tid in threads]
        if len(listed) + len(tids) > MAX_PAUSED_THREADS:
            return False
        try:
            self._write(listed + tids)
        except OSError:
            self.failed += 1
            self._retry_at = now + PAUSE_NS
            return False
        back, last = self._back.pop(key, (0, 0))
        length = min(2 * last, MAX_PAUSE_NS) if last and now - back < last else PAUSE_NS
        self.paused[key] = (now + length, length, tids)
        self.count += 1
        return True

    def resume(self, now: int, last_read: int = 0) -> list[Hashable]:
        """Bring back the processes whose pause ended by ``now``, if the last read had
        ``last_read`` events, fewer than :data:`CAUGHT_UP`: the ones brought back."""
        due = [key for key, (until, _, _) in self.paused.items() if until <= now]
        if not due or last_read >= CAUGHT_UP:
            return []
        kept = {key: value for key, value in self.paused.items() if key not in due}
        try:
            self._write([tid for _, _, threads in kept.values() for tid in threads])
        except OSError:  # they stay out: tried again at the next read
            self.failed += 1
            return []
        for key in due:
            self._back[key] = (now, self.paused[key][1])
            if len(self._back) > MAX_BACK:
                del self._back[next(iter(self._back))]
        self.paused = kept
        return due
