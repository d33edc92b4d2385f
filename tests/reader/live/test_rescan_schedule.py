# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The periodic rescan costs a bounded share of the time whatever the number of user_events
names (a fake tracefs with 10,000 other names, on a clock the test moves), lists only when
the change signal says so or at its quiet interval, and never holds up an answer to an
announcement."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.live import new_tracepoint_signal
from opentelemetry_exporter_userevents.reader.live.announcement_thread import (
    STOP_TIMEOUT,
    AnnouncementThread,
)
from opentelemetry_exporter_userevents.reader.live.new_tracepoint_signal import (
    PROBE_NAME,
    NewTracepointSignal,
)
from opentelemetry_exporter_userevents.reader.live.rescan_schedule import (
    FULL_LISTING_SHARE,
    QUIET_LISTING_INTERVAL,
    RescanSchedule,
)
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from tests.reader.live.test_announcement_thread import FakeListener

NAMES = 10_000
LISTING_COST = 0.1
"""Seconds one listing of a system takes on the test's clock (10,000 names: the order of
what issue 42 measured for a whole rescan, 196 ms)."""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SlowTracefs(Tracefs):
    """A directory tree as tracefs whose listings cost :data:`LISTING_COST` on the clock."""

    def __init__(self, path: str, clock: Clock) -> None:
        super().__init__(path)
        self.clock = clock
        self.listings = 0

    def events(self, system: str) -> list[str]:
        self.listings += 1
        self.clock.now += LISTING_COST
        return super().events(system)


def host(tmp_path: Path, clock: Clock) -> SlowTracefs:
    multi = tmp_path / "events" / USER_EVENTS_MULTI_SYSTEM
    multi.mkdir(parents=True)
    for n in range(NAMES):  # another program's tracepoints, the ids it was given
        (multi / f"other_{n}.{n:x}").mkdir()
    return SlowTracefs(str(tmp_path), clock)


def test_with_ten_thousand_names_and_no_signal_listings_take_at_most_their_share(
    tmp_path, monkeypatch
):
    """No change signal (a kernel without MULTI_FORMAT): the main loop's rescans list at
    most :data:`FULL_LISTING_SHARE` of the time (the reader used to list every 0.5 s: a
    listing of 0.2 s took 29% of it)."""
    clock = Clock()
    monkeypatch.setattr(time, "monotonic", clock)
    tracefs = host(tmp_path, clock)
    reader = TraceReader(tracefs, prefix="*", hold=False)
    began = clock.now
    while clock.now < began + 60:
        clock.now += 0.1  # the main loop's reads
        reader.discover()
    listing_time = tracefs.listings * LISTING_COST
    assert tracefs.listings >= 2  # it still lists
    assert listing_time <= FULL_LISTING_SHARE * (clock.now - began) + 2 * LISTING_COST


class FakeSignal:
    def __init__(self) -> None:
        self.new = False
        self.asked = 0
        self.unavailable: str | None = None
        self.next_id: int | None = None

    def changed(self) -> bool:
        self.asked += 1
        new, self.new = self.new, False
        return new

    def learn(self, names: object) -> None:
        pass


def test_with_a_signal_that_says_nothing_changed_it_lists_at_its_quiet_interval_only(
    tmp_path, monkeypatch
):
    clock = Clock()
    monkeypatch.setattr(time, "monotonic", clock)
    tracefs = host(tmp_path, clock)
    reader = TraceReader(tracefs, prefix="*", hold=False)
    signal = FakeSignal()
    reader.rescans.signal = signal  # type: ignore[assignment]
    began = clock.now
    while clock.now < began + 60:
        clock.now += 0.1
        reader.discover()
    full = reader.rescans.stats.full_listings
    assert tracefs.listings == 2 * full
    assert 60 / QUIET_LISTING_INTERVAL - 1 <= full <= 60 / QUIET_LISTING_INTERVAL + 1
    assert signal.asked >= 60 / 0.5 / 2  # asked at (nearly) every interval: O(1) each

    signal.new = True  # a multi-format tracepoint was made
    before, asked = full, signal.asked
    while signal.asked == asked:
        clock.now += 0.1
        reader.discover()
    assert reader.rescans.stats.full_listings == before + 1  # listed at that check
    assert reader.rescans.stats.signalled >= 1


def test_a_listing_waits_for_its_share_even_when_the_signal_fires_at_every_check():
    schedule = RescanSchedule(0.5, FakeSignal())  # type: ignore[arg-type]
    schedule.listed(0.0, 1.0, [])  # one listing of a second
    fires = 0
    now = 1.0
    earliest = 1.0 + 1.0 * (1 / FULL_LISTING_SHARE - 1)  # 19 s after it ended
    while now + 0.5 < earliest:
        now += 0.5
        schedule.signal.new = True  # type: ignore[union-attr]
        fires += schedule.due(now)
    assert fires == 0 and schedule.stats.checks > 30  # not before 19 s had passed
    assert schedule.due(earliest)


class KernelCounter:
    """Multi-format registrations on a fake tracefs: each new one is ``<name>.<next id>``."""

    def __init__(self, tracefs: Tracefs) -> None:
        self.tracefs = tracefs
        self.next_id = 0

    def register(self, fd, command, flags, address, bit, *args, **kwargs) -> int:
        name = command.split(" ", 1)[0]
        directory = self.tracefs.event_dir(USER_EVENTS_MULTI_SYSTEM, f"{name}.{self.next_id:x}")
        os.makedirs(directory)
        with open(os.path.join(directory, "id"), "w") as f:
            f.write(f"{1000 + self.next_id}\n")
        self.next_id += 1
        return 0

    def listing(self) -> list[str]:
        return self.tracefs.events(USER_EVENTS_MULTI_SYSTEM)


def test_the_signal_says_whether_another_multi_format_tracepoint_was_made(tmp_path, monkeypatch):
    (tmp_path / "user_events_data").write_bytes(b"")
    tracefs = Tracefs(str(tmp_path))
    kernel = KernelCounter(tracefs)
    monkeypatch.setattr(new_tracepoint_signal, "register_ioctl", kernel.register)
    monkeypatch.setattr(new_tracepoint_signal, "unregister_ioctl", lambda *a, **k: None)
    signal = NewTracepointSignal(tracefs)
    try:
        assert signal.changed()  # nothing known yet
        signal.learn(kernel.listing())
        assert not signal.changed() and not signal.changed()
        kernel.register(-1, "other_svc_span u32 a", 2, 0, 0)  # another program's
        assert signal.changed()
        assert signal.changed()  # still unknown until a listing saw a probe
        signal.learn(kernel.listing())
        assert not signal.changed()
        assert signal.unavailable is None and signal.probes == 6
    finally:
        signal.close()


def test_without_user_events_data_there_is_no_signal_and_it_says_why(tmp_path):
    signal = NewTracepointSignal(Tracefs(str(tmp_path)))
    assert signal.changed() and signal.changed()
    assert signal.unavailable is not None and "user_events_data" in signal.unavailable


def test_an_announcement_is_answered_while_a_listing_of_every_name_runs():
    """The listing is held until the answer came (the reader used to run the rescan on the
    thread that answers: an app waited for the whole listing)."""
    listener = FakeListener()
    listing, release, got = threading.Event(), threading.Event(), threading.Event()
    answered: list[set[str]] = []

    def rescan() -> bool:
        listing.set()
        release.wait(STOP_TIMEOUT * 4)
        return True

    def answer(prefixes: set[str]) -> None:
        answered.append(prefixes)
        got.set()

    answers = AnnouncementThread(
        listener,  # type: ignore[arg-type]
        threading.Lock(),
        lambda pids: None,
        answer,
        rescan,
        0.01,
    )
    answers.start()
    try:
        assert listing.wait(STOP_TIMEOUT), "no rescan"
        listener.announce("checkout")
        assert got.wait(STOP_TIMEOUT), "not answered while the listing ran"
        assert not release.is_set() and answered == [{"checkout"}]
    finally:
        release.set()
        answers.stop()
        listener.close()


@pytest.mark.parametrize("names", [["probe"], []])
def test_a_listing_without_our_probe_leaves_the_next_check_unknown(tmp_path, names):
    (tmp_path / "user_events_data").write_bytes(b"")
    signal = NewTracepointSignal(Tracefs(str(tmp_path)))
    signal.learn([f"{signal.name}.{n}" for n in names] + ["other.5"])
    assert signal.changed()  # no probe held when it listed: nothing to expect


def test_the_probe_is_never_taken_for_one_of_our_tracepoints():
    decoder = RecordDecoder("*")
    assert decoder.kind_of(f"{PROBE_NAME}_4242.1f") is None
    assert decoder.kind_of(f"{PROBE_NAME}_4242") is None


def test_between_listings_an_announced_prefix_is_looked_up_from_the_signals_next_id(
    tmp_path, monkeypatch
):
    """Between full listings the counter moves on (here 45 probes in 9 s, at a 0.2 s
    interval): an app announced then is still found by name, its ids past the 32 after
    the last listing's highest."""
    (tmp_path / "user_events_data").write_bytes(b"")
    tracefs = Tracefs(str(tmp_path))
    kernel = KernelCounter(tracefs)
    monkeypatch.setattr(new_tracepoint_signal, "register_ioctl", kernel.register)
    monkeypatch.setattr(new_tracepoint_signal, "unregister_ioctl", lambda *a, **k: None)
    clock = Clock()
    monkeypatch.setattr(time, "monotonic", clock)
    reader = TraceReader(tracefs, prefix="*", hold=False, rescan_interval=0.2)
    enabled: list[str] = []
    reader._enable = lambda system, name, kind: enabled.append(name) or True  # type: ignore[method-assign]
    reader.rescans.signal = NewTracepointSignal(tracefs)
    try:
        reader.rescans.due(clock.now)  # as start does: the probe, then the listing
        reader.scan()
        for _ in range(45):
            clock.now += 0.2
            assert not reader.rescan_if_due()  # nothing new: no listing
        kernel.register(-1, "svc_span u32 a", 2, 0, 0)  # the app, then its announcement
        reader.scan({"svc"})
        assert enabled == [f"svc_span.{kernel.next_id - 1:x}"]
        assert reader.rescans.stats.full_listings == 1
    finally:
        reader.rescans.signal.close()
