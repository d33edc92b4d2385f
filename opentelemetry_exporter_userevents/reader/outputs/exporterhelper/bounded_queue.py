# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A queue between two stages of the reader, bounded in items and in bytes, whose ``put``
never waits: a stage that reads the kernel's buffers must never wait on one that writes.

What does not fit is dropped and counted by reason, named with the stage (``output: queue
full``), so the summary can say where and why; the byte size of an item is the producer's
estimate. The consumer takes items with :meth:`BoundedQueue.get`; once the queue is closed,
``get`` returns None when it is empty, and :meth:`BoundedQueue.take_all` empties it (what
a stopping stage could not deliver). Counts are read under a lock held only to copy them.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")

QUEUE_FULL = "queue full"
"""Reason: the queue holds its bound of items or bytes."""
OLDEST_DROPPED = "queue full (oldest dropped)"
"""Reason: taken out, oldest first, to make room for a newer item (:meth:`BoundedQueue.put_newest`:
the Collector's sending queue keeps the newest)."""
QUEUE_CLOSED = "queue closed"
"""Reason: put after :meth:`BoundedQueue.close` (the stage is stopping)."""


class BoundedQueue(Generic[T]):
    """At most ``max_items`` items and ``max_bytes`` estimated bytes (an item larger than
    ``max_bytes`` alone is never taken: the producer keeps its items small)."""

    def __init__(self, stage: str, max_items: int, max_bytes: int) -> None:
        if max_items < 1 or max_bytes < 1:
            raise ValueError("a queue holds at least one item of one byte")
        self.stage = stage
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._items: deque[tuple[T, int]] = deque()
        self._bytes = 0
        self._closed = False
        self._dropped: dict[str, int] = {}
        self._changed = threading.Condition(threading.Lock())

    def put(self, item: T, size: int, wait_until: float | None = None) -> str | None:
        """Queue ``item`` of ``size`` estimated bytes: None, or if it does not fit, why it was
        dropped (``stage: reason``, counted). Never waits, unless ``wait_until`` (monotonic)
        is given: then it waits for room until that time (a producer that stopped reading)."""
        with self._changed:
            while True:
                if self._closed:
                    reason = QUEUE_CLOSED
                elif self._fits(size):
                    self._items.append((item, size))
                    self._bytes += size
                    self._changed.notify_all()
                    return None
                else:
                    reason = QUEUE_FULL
                left = None if wait_until is None else wait_until - time.monotonic()
                if self._closed or left is None or left <= 0 or size > self.max_bytes:
                    key = f"{self.stage}: {reason}"
                    self._dropped[key] = self._dropped.get(key, 0) + 1
                    return key
                self._changed.wait(left)

    def put_newest(self, item: T, size: int) -> tuple[str | None, list[T]]:
        """Queue ``item`` of ``size`` estimated bytes, taking out the oldest items to make
        room (counted, ``stage: queue full (oldest dropped)``); never waits. None and the
        items taken out; or, if it cannot be queued (closed, or larger than the bound
        alone), why it was dropped (counted) and no item taken out."""
        with self._changed:
            reason = QUEUE_CLOSED if self._closed else None
            if reason is None and size > self.max_bytes:
                reason = QUEUE_FULL
            if reason is not None:
                key = f"{self.stage}: {reason}"
                self._dropped[key] = self._dropped.get(key, 0) + 1
                return key, []
            taken: list[T] = []
            while self._items and not self._fits(size):
                old, old_size = self._items.popleft()
                self._bytes -= old_size
                taken.append(old)
            if taken:
                key = f"{self.stage}: {OLDEST_DROPPED}"
                self._dropped[key] = self._dropped.get(key, 0) + len(taken)
            self._items.append((item, size))
            self._bytes += size
            self._changed.notify_all()
            return None, taken

    def _fits(self, size: int) -> bool:
        return len(self._items) < self.max_items and self._bytes + size <= self.max_bytes

    def get(self, timeout: float | None = None) -> T | None:
        """The oldest item, waiting for one (at most ``timeout`` s); None when there is none
        in time, or the queue is closed and empty."""
        with self._changed:
            if not self._items and not self._closed:
                self._changed.wait_for(lambda: bool(self._items) or self._closed, timeout)
            if not self._items:
                return None
            item, size = self._items.popleft()
            self._bytes -= size
            self._changed.notify_all()
            return item

    def close(self) -> None:
        """Take no more items; ``get`` returns what is left, then None."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def take_all(self) -> list[T]:
        """Empty the queue: what is left, oldest first."""
        with self._changed:
            items = [item for item, _size in self._items]
            self._items.clear()
            self._bytes = 0
            self._changed.notify_all()
            return items

    def counts(self) -> tuple[int, int, dict[str, int]]:
        """Items and estimated bytes queued, and items dropped by ``stage: reason``."""
        with self._changed:
            return len(self._items), self._bytes, dict(self._dropped)
