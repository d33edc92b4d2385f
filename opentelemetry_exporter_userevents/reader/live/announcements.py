# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A machine-wide reader's ear for new services: the ``otel_userevents_announce`` records.

A reader of every prefix (``--prefix '*'``) registers the announcement tracepoint in both
layouts (:class:`.TracepointHolder`) and enables it in a tracefs instance of its own
(``otel-userevents-announce.<pid>.<start>.<n>.pidns<inode>``), with ``buffer_percent`` 0 so
that ``poll`` wakes the reader at the first record. An exporter that finds it enabled writes
its prefix there and waits until its tracepoints are listened to (``_export/announce.py``,
docs/schema.md "Announcements"); the reader's thread for them (:mod:`.announcement_thread`)
looks the prefix's tracepoints up at once.

Any local process allowed to write user_events can write here too, with any text: a record
counts only if it decodes by the tracepoint's format, its prefix is one our names can have
and its event is known; at most :data:`MAX_PREFIXES` prefixes are remembered (the oldest
are forgotten first, and counted), a "gave up" record counts only from the writer of the
prefix's first announcement (its owner), and look-ups are limited per second
(:mod:`.announcement_thread`).

The owner is the first announcement's ``common_pid``, the writing thread: an exporter writes
its announcement and its "gave up" from one call (``_export/announce.py``), so from one
thread. A neighbour that announces a prefix already announced, then gives up, marks nothing
(counted in ``gave_up_not_theirs``); so does a second process of the same service that gives
up (the price: its late start is not reported). A neighbour that announces a prefix before
its service ever does owns it: that needs the prefix known before the service starts.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass, field

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageError, PageLayout, parse_page
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.reader.live.cpu_pipes import CpuPipes
from opentelemetry_exporter_userevents.reader.live.tracefs_instance import TracefsInstance
from opentelemetry_exporter_userevents.record.schema import (
    ANNOUNCE,
    ANNOUNCE_GAVE_UP,
    ANNOUNCE_REGISTERED,
)
from opentelemetry_exporter_userevents.record.tracepoints import is_announce, is_prefix
from opentelemetry_exporter_userevents.record.unpack import RecordUnpacker

ANNOUNCE_INSTANCE_PREFIX = "otel-userevents-announce."
MAX_PREFIXES = 1024
"""Prefixes remembered; beyond, the oldest are forgotten and counted in ``forgotten``. Also
the most one read hands to be looked up by name: the others are remembered and counted in
``not_looked_up`` (the next full listing finds their tracepoints, :mod:`.rescan_schedule`)."""
_BUFFER_KB = 128
_PAGES_PER_READ = 64


@dataclass
class Announced:
    """What the announcements of one prefix said, and when the reader heard them."""

    prefix: str
    pid: int
    """The writer of the first announcement (``common_pid``): the prefix's owner, whose
    "gave up" alone marks it late."""
    heard: float
    """``time.monotonic()`` when the reader read the first one."""
    wait_ms: int
    gave_up: float | None = None
    """When the reader read that a writer stopped waiting (ANNOUNCE_GAVE_UP), if one did."""
    count: int = 1


@dataclass
class AnnouncementStats:
    records: int = 0
    """Announcements that decoded and made sense."""
    invalid: int = 0
    """Records that did not decode, or whose prefix or event made no sense."""
    forgotten: int = 0
    """Prefixes forgotten, the oldest first, to keep at most :data:`MAX_PREFIXES`."""
    lost: int = 0
    """Announcements the kernel lost (the instance's buffer overflowed)."""
    corrupt_pages: int = 0
    not_looked_up: int = 0
    """Announcements past :data:`MAX_PREFIXES` prefixes in one read: remembered, not looked
    up by name (the next full listing finds their tracepoints)."""
    gave_up_not_theirs: int = 0
    """"Gave up" records from another writer than the one that first announced that prefix
    (or of a prefix never announced, or forgotten): they mark nothing late."""


@dataclass
class AnnouncementListener:
    """Enables the announcement tracepoints in an instance of its own and reads them."""

    tracefs: Tracefs
    layout: PageLayout
    stats: AnnouncementStats = field(default_factory=AnnouncementStats)
    announced: dict[str, Announced] = field(default_factory=dict)
    listening: list[str] = field(default_factory=list)
    """``system/name`` of the announcement tracepoints enabled."""
    problems: dict[str, str] = field(default_factory=dict)
    """Announcement tracepoints not enabled (another program's format), and why."""

    def __post_init__(self) -> None:
        self.tracefs_instance = TracefsInstance(self.tracefs, ANNOUNCE_INSTANCE_PREFIX)
        self._unpackers: dict[int, RecordUnpacker] = {}
        self.pipes = CpuPipes(self.tracefs, self.tracefs_instance.name, _PAGES_PER_READ)
        self._poll = select.poll()
        self.heard_pids: set[int] = set()
        """The writers (``common_pid``) of the announcements the last :meth:`read` heard."""

    def start(self) -> None:
        """Create the instance and enable every announcement tracepoint of our format (the
        caller registered them first, so they exist)."""
        instance = self.tracefs_instance
        instance.create()
        self.tracefs.set_buffer_size_kb(instance.name, _BUFFER_KB)
        self.tracefs.set_buffer_percent(instance.name, 0)  # poll wakes at the first record
        for system in (USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM):
            for name in self.tracefs.events(system):
                if is_announce(name):
                    self._enable(system, name)
        self.pipes.open()
        self.pipes.register(self._poll)

    def _enable(self, system: str, name: str) -> None:
        where = f"{system}/{name}"
        try:
            fmt = parse_format(self.tracefs.format_text(system, name))
            unpacker = ANNOUNCE.unpacker(fmt)
            self.tracefs_instance.enable(system, name)
        except ValueError as error:
            self.problems[where] = str(error)
            return
        except OSError:
            return  # deleted meanwhile
        self._unpackers[fmt.id] = unpacker
        self.listening.append(where)

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, less if an announcement arrives."""
        if not self.pipes.fds:
            time.sleep(timeout)
            return
        try:
            self._poll.poll(timeout * 1000)
        except InterruptedError:
            pass

    def read(self) -> set[str]:
        """Read the announcements written since the last read (remembered in
        :attr:`announced`); return the prefixes they named (the caller looks for their
        tracepoints at once)."""
        heard: set[str] = set()
        self.heard_pids = set()
        for _, page in self.pipes.read(self.layout.page_size, count_idle_cpus=False):
            self._page(page, heard)
        self.stats.lost = self.pipes.lost
        return heard

    def _page(self, raw: bytes, heard: set[str]) -> None:
        try:
            page = parse_page(raw, self.layout)
        except PageError:
            self.stats.corrupt_pages += 1
            return
        for _, record in page.events:
            unpacker = (
                self._unpackers.get(record[0] | (record[1] << 8)) if len(record) > 8 else None
            )
            try:
                if unpacker is None:
                    raise ValueError("not an announcement")
                values = unpacker.unpack(record)
            except ValueError:
                self.stats.invalid += 1
                continue
            prefix, event = values["prefix"], values["event"]
            if not is_prefix(prefix) or event not in (ANNOUNCE_REGISTERED, ANNOUNCE_GAVE_UP):
                self.stats.invalid += 1
                continue
            pid = int.from_bytes(record[4:8], "little", signed=True)  # common_pid
            if not self._note(prefix, event, values["wait_ms"], pid):
                continue
            self.stats.records += 1
            if prefix in heard or len(heard) < MAX_PREFIXES:
                heard.add(prefix)
                self.heard_pids.add(pid)
            else:
                self.stats.not_looked_up += 1

    def _note(self, prefix: str, event: int, wait_ms: int, pid: int) -> bool:
        """Remember an announcement; False for a "gave up" from another writer than the
        prefix's owner."""
        known = self.announced.get(prefix)
        now = time.monotonic()
        if event == ANNOUNCE_GAVE_UP and (known is None or pid != known.pid):
            self.stats.gave_up_not_theirs += 1
            return False
        if known is None:
            if len(self.announced) >= MAX_PREFIXES:  # forget the oldest: a flood cannot
                del self.announced[next(iter(self.announced))]  # hide a newer service
                self.stats.forgotten += 1
            known = self.announced[prefix] = Announced(prefix, pid, now, wait_ms, count=0)
        known.count += 1
        if event == ANNOUNCE_GAVE_UP and known.gave_up is None:
            known.gave_up = now
        return True

    def close(self) -> None:
        """Disable, remove the instance (idempotent)."""
        self.pipes.close(self._poll)
        self.tracefs_instance.close()
