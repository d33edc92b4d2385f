# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The thread that answers announcements: a flood costs a bounded number of look-ups per
second, what waits is counted, what is not kept is counted, and a genuine service heard
in a flood is still answered (by its turn, or by the full rescan)."""

from __future__ import annotations

import os
import select
import threading

from opentelemetry_exporter_userevents.reader.live.announcement_thread import (
    MAX_ANSWERED_PER_SECOND,
    MAX_PENDING,
    STOP_TIMEOUT,
    AnnouncementThread,
)

START = 1000.0


def thread() -> tuple[AnnouncementThread, list[set[str]]]:
    answered: list[set[str]] = []
    answers = AnnouncementThread(
        None,  # type: ignore[arg-type] # not started: take_in is driven by the test
        threading.Lock(),
        lambda pids: None,
        answered.append,
        lambda: None,
        0.5,
        now=START,
    )
    return answers, answered


def test_a_flood_is_looked_up_at_most_the_rate_a_second_and_what_waits_is_counted():
    answers, answered = thread()
    flood = {f"flood{n}" for n in range(500)}
    answers.take_in(flood, START)
    assert sum(map(len, answered)) == MAX_ANSWERED_PER_SECOND  # the burst, no more
    assert answers.stats.deferred == 500 - MAX_ANSWERED_PER_SECOND
    assert answers.pending == 500 - MAX_ANSWERED_PER_SECOND
    answers.take_in(set(), START + 0.5)  # half a second: half the rate
    assert sum(map(len, answered)) == MAX_ANSWERED_PER_SECOND * 3 // 2
    answers.take_in(set(), START + 10.5)  # a quiet spell refills only one burst
    assert sum(map(len, answered)) == MAX_ANSWERED_PER_SECOND * 5 // 2
    looked_up = set().union(*answered)
    assert len(looked_up) == sum(map(len, answered)) and looked_up <= flood  # each once


def test_a_prefix_heard_again_while_it_waits_is_not_queued_or_counted_twice():
    answers, answered = thread()
    flood = {f"flood{n}" for n in range(MAX_ANSWERED_PER_SECOND + 10)}
    answers.take_in(flood, START)
    waiting = flood - set().union(*answered)
    assert answers.pending == len(waiting) == 10 and answers.stats.deferred == 10
    answers.take_in(waiting, START)  # no token yet: all still waiting, once
    assert answers.pending == 10 and answers.stats.deferred == 10


def test_what_waits_is_bounded_and_what_is_not_kept_is_counted():
    answers, answered = thread()
    answers.take_in({f"flood{n}" for n in range(MAX_PENDING * 3)}, START)
    assert answers.pending == MAX_PENDING - MAX_ANSWERED_PER_SECOND
    assert answers.stats.dropped == MAX_PENDING * 2
    assert answers.stats.deferred == MAX_PENDING - MAX_ANSWERED_PER_SECOND


def test_a_genuine_service_heard_in_a_flood_is_answered_in_its_turn():
    answers, answered = thread()
    answers.take_in({f"flood{n}" for n in range(200)}, START)
    answers.take_in({"genuine"}, START + 0.01)
    seconds = 0.0
    while not any("genuine" in turn for turn in answered):
        seconds += 0.25
        answers.take_in(set(), START + seconds)
        assert seconds < 200 / MAX_ANSWERED_PER_SECOND + 1


class FakeListener:
    """Announcements arrive on a pipe: one line, one prefix."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        os.set_blocking(self.read_end, False)
        self.pipes = self
        self.heard_pids: set[int] = set()
        self.fail = False

    def register(self, poll: select.poll) -> None:
        poll.register(self.read_end, select.POLLIN)

    def read(self) -> set[str]:
        if self.fail:
            raise RuntimeError("a bug")
        try:
            data = os.read(self.read_end, 4096)
        except BlockingIOError:
            return set()
        heard = set(data.decode().split())
        self.heard_pids = {42} if heard else set()
        return heard

    def announce(self, prefix: str) -> None:
        os.write(self.write_end, f"{prefix}\n".encode())

    def close(self) -> None:
        os.close(self.read_end)
        os.close(self.write_end)


def test_the_thread_answers_while_the_main_loop_holds_nothing_and_stops_when_asked():
    listener = FakeListener()
    pids: list[set[int]] = []
    answered: list[set[str]] = []
    got = threading.Event()

    def answer(prefixes: set[str]) -> None:
        answered.append(prefixes)
        got.set()

    answers = AnnouncementThread(
        listener,  # type: ignore[arg-type]
        threading.Lock(),
        pids.append,
        answer,
        lambda: None,
        3600.0,  # no full rescan in this test: the answer comes from the announcement
    )
    answers.start()
    try:
        listener.announce("checkout")
        assert got.wait(STOP_TIMEOUT), "not answered"
        assert answered == [{"checkout"}] and pids == [{42}]  # writers listed first
    finally:
        answers.stop()
        listener.close()
    assert not answers.running and answers.error is None
    answers.stop()  # idempotent


def test_a_thread_that_fails_says_why_and_stops_so_the_main_loop_answers():
    listener = FakeListener()
    listener.fail = True
    answers = AnnouncementThread(
        listener,  # type: ignore[arg-type]
        threading.Lock(),
        lambda pids: None,
        lambda prefixes: None,
        lambda: None,
        3600.0,
    )
    answers.start()
    listener.announce("checkout")
    answers._thread.join(STOP_TIMEOUT)
    assert not answers.running
    assert answers.error is not None and "a bug" in answers.error
    answers.stop()
    listener.close()
