# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The queue between two stages: bounded in items and in bytes, ``put`` never waits, and
what does not fit is dropped and counted by stage and reason."""

from __future__ import annotations

import threading
import time

import pytest

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.bounded_queue import (
    BoundedQueue,
)


def test_the_item_bound_drops_and_counts_what_does_not_fit() -> None:
    queue: BoundedQueue[int] = BoundedQueue("output", max_items=3, max_bytes=1 << 20)
    assert [queue.put(n, 10) for n in range(5)] == [None] * 3 + ["output: queue full"] * 2
    assert queue.counts() == (3, 30, {"output: queue full": 2})
    assert [queue.get(0), queue.get(0), queue.get(0), queue.get(0)] == [0, 1, 2, None]
    assert queue.put(5, 10) is None  # room again
    assert queue.counts() == (1, 10, {"output: queue full": 2})


def test_the_byte_bound_drops_and_counts_what_does_not_fit() -> None:
    queue: BoundedQueue[str] = BoundedQueue("output", max_items=100, max_bytes=1000)
    assert queue.put("a", 600) is None
    assert queue.put("b", 500) == "output: queue full"
    assert queue.put("c", 400) is None  # exactly the bound
    assert queue.put("huge", 10**12) == "output: queue full"  # larger than the bound alone
    assert queue.counts() == (2, 1000, {"output: queue full": 2})


def test_hostile_volume_stays_within_the_bounds() -> None:
    """A producer far faster than its consumer: the queue never holds more than its bounds,
    and every item is either taken or counted as dropped."""
    queue: BoundedQueue[int] = BoundedQueue("output", max_items=64, max_bytes=64 * 100)
    taken: list[int] = []
    done = threading.Event()

    def consume() -> None:
        while (item := queue.get()) is not None:
            taken.append(item)
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    most = 0
    for n in range(20_000):
        queue.put(n, 100 + n % 50)
        items, size, _ = queue.counts()
        most = max(most, items)
        assert items <= 64 and size <= 64 * 100
    queue.close()
    assert done.wait(60)
    _, _, dropped = queue.counts()
    assert len(taken) + dropped.get("output: queue full", 0) == 20_000
    assert taken == sorted(taken)  # in order


def test_put_never_waits_for_a_consumer_that_does_not_take() -> None:
    """With no consumer at all, a thousand puts into a full queue all return (dropped),
    where a blocking put would hang here."""
    queue: BoundedQueue[int] = BoundedQueue("output", max_items=1, max_bytes=100)
    result: list[str | None] = []
    thread = threading.Thread(target=lambda: result.extend(queue.put(n, 1) for n in range(1000)))
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    assert result.count(None) == 1 and result.count("output: queue full") == 999


def test_wait_until_waits_for_room_then_gives_up_at_that_time() -> None:
    queue: BoundedQueue[int] = BoundedQueue("output", max_items=1, max_bytes=100)
    assert queue.put(1, 1) is None
    threading.Timer(0.2, queue.get).start()
    assert queue.put(2, 1, wait_until=time.monotonic() + 30) is None  # room came
    assert queue.put(3, 1, wait_until=time.monotonic() + 0.1) == "output: queue full"


def test_closed_the_consumer_gets_what_is_left_then_none_and_puts_are_counted() -> None:
    queue: BoundedQueue[int] = BoundedQueue("decode", max_items=10, max_bytes=100)
    queue.put(1, 1)
    queue.put(2, 1)
    queue.close()
    assert queue.put(3, 1) == "decode: queue closed"
    assert queue.get() == 1
    assert queue.take_all() == [2]
    assert queue.get() is None
    assert queue.counts() == (0, 0, {"decode: queue closed": 1})


def test_a_queue_holds_something() -> None:
    with pytest.raises(ValueError):
        BoundedQueue("output", max_items=0, max_bytes=1)
