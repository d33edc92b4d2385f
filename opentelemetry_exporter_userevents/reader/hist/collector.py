# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Kernel-side histograms of our span and log tracepoints: hist triggers, no records read.

The collector makes a tracefs instance of its own (``instances/otel-userevents-hist.<pid>.
<start>.<n>.pidns<inode>``, :mod:`.tracefs_instance`) and sets one hist trigger on every
version of our span and log tracepoints there (both layouts), rescanning for versions that
appear later. A trigger alone puts the event in "soft" mode: the writers' enable bit is set
and the kernel counts each record into the table, but nothing is kept in any ring buffer
(seen in tests/kernel/test_hist.py). It holds the prefixes' tracepoints registered
(:mod:`.tracepoint_holder`), so an app started later is counted from its first record.
Closing removes the triggers and the instance.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.hist.hist_file import MergedHistogram, parse_hist
from opentelemetry_exporter_userevents.reader.live.announcements import AnnouncementListener
from opentelemetry_exporter_userevents.reader.live.our_tracepoints import our_tracepoints
from opentelemetry_exporter_userevents.reader.live.tracefs_instance import (
    InstanceOwner,
    TracefsInstance,
)
from opentelemetry_exporter_userevents.reader.live.tracepoint_holder import TracepointHolder
from opentelemetry_exporter_userevents.record.schema import LOG, SPAN, Schema
from opentelemetry_exporter_userevents.record.tracepoints import (
    ANY_PREFIX,
    LOG_KIND,
    SPAN_KIND,
    parse_tracepoint,
)

HIST_INSTANCE_PREFIX = "otel-userevents-hist."


@dataclass(frozen=True)
class HistTrigger:
    """A hist trigger over fields of one of our schemas."""

    schema: Schema
    keys: tuple[str, ...]
    """Text keys first: a row is parsed from its right end (:mod:`.hist`)."""
    values: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        vals = ",".join(("hitcount", *self.values))
        return f"hist:keys={','.join(self.keys)}:vals={vals}:sort=hitcount.descending"

    @property
    def text_keys(self) -> frozenset[str]:
        return frozenset(f.name for f in self.schema.texts if f.name in self.keys)


TRIGGERS = {
    SPAN_KIND: HistTrigger(SPAN, ("name", "status_code"), ("duration_ns",)),
    LOG_KIND: HistTrigger(LOG, ("scope", "severity_number")),
}
"""Spans: count and total duration per name and status. Logs: count per instrumentation
scope and severity number (the severity classes are separate tracepoints already)."""

LISTEN_ONLY = "hist:keys=common_pid"
"""Under ``*``, on a prefix's other tracepoints (resource, metrics): a writer that announced
itself waits until every one of its tracepoints is listened to (:mod:`.announcements`).
Never read."""


@dataclass(frozen=True)
class _Triggered:
    system: str
    name: str
    kind: str
    prefix: str
    event_id: int


@dataclass
class HistResult:
    """What the kernel counted, per (prefix, kind), and what could not be counted."""

    tables: dict[tuple[str, str], MergedHistogram]
    problems: dict[str, str]
    """``system/name`` of tracepoints not counted (or not read), and why."""


class HistCollector(InstanceOwner):
    """Sets hist triggers on our span and log tracepoints; use as a context manager."""

    def __init__(
        self,
        tracefs: Tracefs,
        prefixes: Sequence[str],
        hold: bool = True,
        rescan_interval: float = 0.5,
    ) -> None:
        self.tracefs = tracefs
        self.prefixes = tuple(prefixes)
        self.hold = hold
        self.rescan_interval = rescan_interval
        self.tracefs_instance = TracefsInstance(
            tracefs, HIST_INSTANCE_PREFIX, before_stale_removal=self._clear_triggers
        )
        self.instance = self.tracefs_instance.name
        self.decoder = RecordDecoder(self.prefixes)
        self.holder: TracepointHolder | None = None
        self.problems: dict[str, str] = {}
        self._triggered: dict[tuple[str, str], _Triggered] = {}
        self._listened_only: dict[tuple[str, str], int] = {}
        self._next_scan = 0.0
        self.announcements: AnnouncementListener | None = None
        """Under ``*``: announcements of new services; each read that finds one rescans."""

    def start(self) -> HistCollector:
        """Check rights, remove stale instances, make ours, set the triggers."""
        self.tracefs_instance.create()
        try:
            if self.hold:
                self.holder = TracepointHolder(self.tracefs)
                self.holder.hold(p for p in self.prefixes if p != ANY_PREFIX)
                if ANY_PREFIX in self.prefixes:
                    self.holder.hold_announcements()
                    self.announcements = AnnouncementListener(
                        self.tracefs,
                        PageLayout.from_header_page(
                            self.tracefs.header_page(), self.tracefs.sub_buffer_size(self.instance)
                        ),
                    )
                    self.announcements.start()
            self.scan()
        except BaseException:
            self.close()
            raise
        return self

    def scan(self, only: Collection[str] | None = None) -> list[str]:
        """Set triggers on span and log tracepoints that appeared since the last scan
        (``only``: of these prefixes only, just announced)."""
        added = []
        for system, name, kind in our_tracepoints(self.tracefs, self.decoder, only):
            trigger = TRIGGERS.get(kind)
            parsed = parse_tracepoint(name)
            where = f"{system}/{name}"
            if trigger is None and self.announcements is not None:
                self._listen_only(system, name)
            if trigger is None or parsed is None or where in self.problems:
                continue
            try:
                event_id = self.tracefs.event_id(system, name)
                known = self._triggered.get((system, name))
                if known is not None and known.event_id == event_id:
                    continue
                self.decoder.add(self.tracefs.read_format(system, name))
                self.tracefs_instance.set_trigger(system, name, trigger.text)
            except ValueError as error:  # not our schema, or the kernel refused the trigger
                self.problems[where] = str(error)
                continue
            except OSError:
                continue  # deleted meanwhile
            triggered = _Triggered(system, name, kind, parsed.prefix, event_id)
            self._triggered[(system, name)] = triggered
            added.append(where)
        if only is None:
            self._next_scan = time.monotonic() + self.rescan_interval
        return added

    def _listen_only(self, system: str, name: str) -> None:
        try:
            event_id = self.tracefs.event_id(system, name)
            if self._listened_only.get((system, name)) == event_id:
                return
            self.tracefs_instance.set_trigger(system, name, LISTEN_ONLY)
        except (OSError, ValueError):
            return  # deleted meanwhile, or refused: the writer waits its timeout
        self._listened_only[(system, name)] = event_id

    def poll(self) -> None:
        """Rescan when a service announced itself, or when it is time (call it while
        waiting)."""
        heard = self.announcements.read() if self.announcements is not None else set()
        if time.monotonic() >= self._next_scan:
            self.scan()
        elif heard:
            self.scan(heard)

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds; less when a service announces itself."""
        if self.announcements is not None:
            self.announcements.wait(timeout)
        else:
            time.sleep(timeout)

    @property
    def tracepoints(self) -> dict[str, str]:
        """``system/name`` of each tracepoint with our trigger, and its kind."""
        return {f"{t.system}/{t.name}": t.kind for t in self._triggered.values()}

    def read(self) -> HistResult:
        """Every triggered tracepoint's table, parsed and added up per prefix and kind."""
        problems = dict(self.problems)
        tables: dict[tuple[str, str], MergedHistogram] = {}
        for t in self._triggered.values():
            try:
                text = self.tracefs.read_hist(t.system, t.name, self.instance)
                table = parse_hist(text, TRIGGERS[t.kind].text_keys)
            except (OSError, ValueError) as error:
                problems[f"{t.system}/{t.name}"] = f"its histogram could not be read: {error}"
                continue
            if (t.prefix, t.kind) not in tables:
                tables[(t.prefix, t.kind)] = MergedHistogram(table.key_fields, table.value_fields)
            tables[(t.prefix, t.kind)].add(table)
        return HistResult(tables, problems)

    def close(self) -> None:
        """Remove the triggers and the instance; let go of the held tracepoints.
        Idempotent."""
        self.tracefs_instance.close()
        if self.announcements is not None:
            self.announcements.close()
        if self.holder is not None:
            self.holder.close()

    def _clear_triggers(self, instance: str) -> None:
        """Before removing a stale instance: its user events' triggers."""
        for system in (USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM):
            for name in self.tracefs.events(system):
                try:
                    self.tracefs.clear_triggers(system, name, instance)
                except OSError:
                    continue

    def __enter__(self) -> HistCollector:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
