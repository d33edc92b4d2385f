# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Announcements on the host: what a reader takes from ``otel_userevents_announce`` records
(any local writer may write there), and how long a writer waits. The kernel tests
(tests/kernel/test_reader_services.py) prove the whole path."""

from __future__ import annotations

import logging
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents._export import announce as writer_side
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader.commands.common import discovery_parts
from opentelemetry_exporter_userevents.reader.live.announcements import (
    MAX_PREFIXES,
    AnnouncementListener,
)
from opentelemetry_exporter_userevents.record.schema import (
    ANNOUNCE,
    ANNOUNCE_GAVE_UP,
    ANNOUNCE_REGISTERED,
)
from opentelemetry_exporter_userevents.record.tracepoints import is_announce
from tests.support.pages import data_event, page, record
from tests.support.records import format_of

EVENT_ID = 41
LAYOUT = PageLayout()


def listener() -> AnnouncementListener:
    heard = AnnouncementListener(None, LAYOUT)  # type: ignore[arg-type]
    heard._unpackers[EVENT_ID] = ANNOUNCE.unpacker(
        format_of(ANNOUNCE, "otel_userevents_announce.1", EVENT_ID)
    )
    return heard


def announcement(prefix: bytes, event: int = ANNOUNCE_REGISTERED, pid: int = 7) -> bytes:
    payload = ANNOUNCE.pack((2000, event), (prefix,))
    return data_event(1, record(EVENT_ID, payload, pid))


def test_a_prefix_is_remembered_with_its_writer_and_whether_it_gave_up():
    heard = listener()
    named: set[str] = set()
    heard._page(page(1, [announcement(b"checkout", pid=42), announcement(b"billing")]), named)
    heard._page(page(2, [announcement(b"billing", ANNOUNCE_GAVE_UP)]), named)
    assert named == {"checkout", "billing"}

    assert heard.stats.records == 3 and heard.stats.invalid == 0
    assert heard.announced["checkout"].pid == 42
    assert heard.announced["checkout"].gave_up is None
    assert heard.announced["billing"].gave_up is not None
    assert heard.announced["billing"].count == 2


@pytest.mark.parametrize(
    "bad",
    [
        announcement(b"\x1b]0;owned\x07"),  # a terminal escape as a prefix
        announcement(b"a b"),
        announcement(b"9lives"),
        announcement(b"x" * 300),
        announcement(b""),
        announcement(b"ok", event=7),  # an event nobody defined
        announcement(b"\xff\xfe"),  # not UTF-8
        data_event(1, record(EVENT_ID, b"\x01\x02")),  # too short for the format
        data_event(1, record(EVENT_ID + 1, ANNOUNCE.pack((1, 0), (b"ok",)))),  # another event
    ],
)
def test_records_that_make_no_sense_are_counted_and_forgotten(bad):
    heard = listener()
    heard._page(page(1, [bad, announcement(b"after")]), set())

    assert heard.stats.invalid == 1
    assert list(heard.announced) == ["after"]


def test_a_corrupt_page_is_counted():
    heard = listener()
    heard._page(b"\0" * 8, set())
    assert heard.stats.corrupt_pages == 1 and heard.announced == {}


def test_a_flood_of_prefixes_is_bounded_and_counted_and_cannot_hide_a_newer_one():
    heard = listener()
    for n in range(MAX_PREFIXES + 50):
        heard._page(page(1, [announcement(f"p{n}".encode())]), set())
    heard._page(page(1, [announcement(b"genuine")]), set())
    assert len(heard.announced) == MAX_PREFIXES
    assert heard.stats.forgotten == 51
    assert "genuine" in heard.announced and "p0" not in heard.announced


def test_gave_up_marks_a_prefix_only_from_a_writer_that_announced_it():
    heard = listener()
    heard._page(page(1, [announcement(b"checkout", pid=42)]), set())
    named: set[str] = set()
    hostile = [
        announcement(b"checkout", ANNOUNCE_GAVE_UP, pid=666),  # another service's prefix
        announcement(b"neverannounced", ANNOUNCE_GAVE_UP, pid=666),
    ]
    heard._page(page(2, hostile), named)
    assert heard.announced["checkout"].gave_up is None
    assert "neverannounced" not in heard.announced and named == set()
    assert heard.stats.gave_up_not_theirs == 2 and heard.stats.records == 1
    heard._page(page(3, [announcement(b"checkout", ANNOUNCE_GAVE_UP, pid=42)]), set())
    assert heard.announced["checkout"].gave_up is not None  # its own writer: late


def test_prefixes_past_the_bound_in_one_read_are_remembered_and_counted_not_looked_up():
    heard = listener()
    flood = [announcement(f"p{n}".encode(), pid=n) for n in range(MAX_PREFIXES + 20)]
    flood.append(announcement(b"p0", pid=99_999))  # heard already: its writer is listed too
    named: set[str] = set()
    for start in range(0, len(flood), 50):
        heard._page(page(1, flood[start : start + 50]), named)
    assert len(named) == MAX_PREFIXES and heard.stats.not_looked_up == 20
    assert 99_999 in heard.heard_pids and f"p{MAX_PREFIXES + 19}" in heard.announced
    assert heard.stats.records == MAX_PREFIXES + 21
    assert "20 announced prefixes not looked up at once (over 1024 in one read)" in (
        discovery_parts(_Reader(heard))  # type: ignore[arg-type]
    )


class _Reader:
    """What the summary reads of a reader under ``*``, with nothing late."""

    def __init__(self, heard: AnnouncementListener) -> None:
        self.announcements = heard
        self.answers = None
        self.found_later_not_remembered = 0
        self.providers = type("P", (), {"not_remembered": 0})()

    def late_services(self) -> list[object]:
        return []

    def late_providers(self) -> list[object]:
        return []


def test_a_neighbour_that_announces_a_prefix_then_gives_up_marks_nothing():
    """The two-record attack: announce the victim's prefix (which made the neighbour one of
    its writers), then give up. Only the first announcement's writer owns the prefix."""
    heard = listener()
    heard._page(page(1, [announcement(b"checkout", pid=42)]), set())
    attack = [
        announcement(b"checkout", pid=666),
        announcement(b"checkout", ANNOUNCE_GAVE_UP, pid=666),
    ]
    heard._page(page(2, attack), set())
    known = heard.announced["checkout"]
    assert known.gave_up is None and known.pid == 42 and known.count == 2
    assert heard.stats.gave_up_not_theirs == 1 and heard.stats.records == 2


def test_many_writers_of_one_prefix_leave_its_owner_in_charge():
    heard = listener()
    writers = [announcement(b"shared", pid=1000 + n) for n in range(200)]
    heard._page(page(1, writers), set())
    later = [announcement(b"shared", ANNOUNCE_GAVE_UP, pid=1000 + n) for n in range(1, 200)]
    heard._page(page(2, later), set())
    known = heard.announced["shared"]
    assert known.gave_up is None and heard.stats.gave_up_not_theirs == 199
    heard._page(page(3, [announcement(b"shared", ANNOUNCE_GAVE_UP, pid=1000)]), set())
    assert known.gave_up is not None  # the owner, though 199 others announced after it


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_payload_never_raises(payload):
    heard = listener()
    heard._page(page(1, [data_event(1, record(EVENT_ID, payload))]), set())
    assert heard.stats.records + heard.stats.invalid + heard.stats.gave_up_not_theirs == 1
    for prefix in heard.announced:
        assert prefix.isascii() and prefix.replace("_", "a").isalnum()


def test_the_announcement_tracepoint_is_known_in_both_layouts_and_no_other():
    assert is_announce("otel_userevents_announce.1f")
    assert is_announce(f"otel_userevents_announce_{ANNOUNCE.version}")
    assert not is_announce("otel_userevents_announced.1")
    assert not is_announce("x_otel_userevents_announce.1")


class FakeRegistration:
    def __init__(self, enabled_after: float | None) -> None:
        self.enabled_at = None if enabled_after is None else time.monotonic() + enabled_after

    @property
    def enabled(self) -> bool:
        return self.enabled_at is not None and time.monotonic() >= self.enabled_at


class FakeAnnounceRegistration:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.written: list[dict] = []
        self.unregistered = False

    def write(self, payload: bytes) -> int:
        self.written.append(ANNOUNCE.unpack(b"\0" * 8 + payload, format_of(ANNOUNCE, "a")))
        return len(payload)

    def unregister(self) -> None:
        self.unregistered = True


class FakeData:
    available = True

    def __init__(self, listened: bool) -> None:
        self.announce = FakeAnnounceRegistration(listened)
        self.commands: list[str] = []

    def register(self, command: str, flags: int, single_format_command: str) -> object:
        self.commands.append(command)
        return self.announce


def test_without_a_machine_wide_reader_nothing_is_written_or_waited_for(monkeypatch):
    data = FakeData(listened=False)
    result = writer_side.announce(data, "svc", [FakeRegistration(None)], True)  # type: ignore[arg-type]
    assert not result.listened and result.waited == 0
    assert data.announce.written == [] and data.announce.unregistered


def test_a_writer_waits_until_it_is_listened_to_then_as_long_again(monkeypatch):
    monkeypatch.setattr(writer_side, "_gave_up_once", False)
    data = FakeData(listened=True)
    result = writer_side.announce(data, "svc", [FakeRegistration(0.05), None], True)  # type: ignore[arg-type]
    assert result.listened and not result.gave_up  # so it waited less than its timeout
    assert result.waited >= 0.1  # 0.05 s for the bits, as long again for a second reader
    assert [(w["event"], w["prefix"], w["wait_ms"]) for w in data.announce.written] == [
        (ANNOUNCE_REGISTERED, "svc", writer_side.DEFAULT_TIMEOUT_MS)
    ]


def test_a_writer_gives_up_after_its_timeout_and_says_so_once_per_process(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT", "100")
    monkeypatch.setattr(writer_side, "_gave_up_once", False)
    data = FakeData(listened=True)
    with caplog.at_level(logging.WARNING):
        result = writer_side.announce(data, "svc", [FakeRegistration(None)], False)  # type: ignore[arg-type]
    assert result.gave_up and result.waited >= 0.1
    assert [w["event"] for w in data.announce.written] == [ANNOUNCE_REGISTERED, ANNOUNCE_GAVE_UP]
    assert "did not listen to prefix 'svc' within 100 ms" in caplog.text
    assert data.commands == [f"otel_userevents_announce_{ANNOUNCE.version} {ANNOUNCE.field_list}"]

    later = FakeData(listened=True)  # the process's next exporter: announced, not waited
    result = writer_side.announce(later, "svc", [FakeRegistration(None)], False)  # type: ignore[arg-type]
    assert result.gave_up and result.waited == 0
    assert [w["event"] for w in later.announce.written] == [ANNOUNCE_REGISTERED]


def test_a_timeout_of_zero_turns_announcements_off(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT", "0")
    data = FakeData(listened=True)
    result = writer_side.announce(data, "svc", [FakeRegistration(None)], True)  # type: ignore[arg-type]
    assert result == writer_side.Announcement() and data.commands == []


@pytest.mark.parametrize("value", ["soon", "-1", "600000"])
def test_a_bad_timeout_is_warned_about_and_the_default_used(monkeypatch, caplog, value):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT", value)
    assert writer_side.timeout_ms() == writer_side.DEFAULT_TIMEOUT_MS
    assert "OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT" in caplog.text
