# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The thread that answers announcements: a flood costs a bounded number of look-ups per
second, what waits is counted, what is not kept is counted, and a genuine service heard
in a flood is still answered (by its turn, or by the full rescan)."""

from __future__ import annotations

import threading

from opentelemetry_exporter_userevents.reader.live.announcement_thread import (
    MAX_ANSWERED_PER_SECOND,
    MAX_PENDING,
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
