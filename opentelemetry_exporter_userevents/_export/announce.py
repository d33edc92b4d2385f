# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Telling a machine-wide reader that our tracepoints exist, before the first write.

A reader started with ``--prefix '*'`` cannot register the tracepoints of prefixes it does
not know, so it finds a new service's tracepoints only when it looks. Instead it holds and
enables one tracepoint for every prefix, ``otel_userevents_announce`` (docs/schema.md). A
writer that finds that tracepoint listened to, after registering its own, writes its prefix
there and waits, up to ``OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT`` milliseconds, until
every one of its tracepoints is listened to: the reader enables them as soon as it reads
the announcement, so a job that writes at once and exits is recorded whole. Then it waits
as long again, for a second machine-wide reader that heard the same record. If the time
passes first, the writer says so there (``ANNOUNCE_GAVE_UP``) and writes on, and the
process's later exporters announce without waiting. When the waits that a reader did
answer add up to more than :data:`SLOW_START_MS`, the process warns once: its start is
slower for a reader that is slow to answer. A writer that
finds the tracepoint not listened to (no machine-wide reader) pays one registration more.
A tool that enables every user event (``trace-cmd record -e 'user_events_multi:*'``)
enables this tracepoint too; the writer sees one enable bit and cannot tell it from a
reader, so beside such a tool it waits the timeout, once per process (README).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry_exporter_userevents import _forksafe
from opentelemetry_exporter_userevents.abi.errors import UserEventsError
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENT_REG_MULTI_FORMAT
from opentelemetry_exporter_userevents.abi.user_events import Registration, UserEventsData
from opentelemetry_exporter_userevents.environment_variables import (
    OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT,
)
from opentelemetry_exporter_userevents.record.schema import (
    ANNOUNCE,
    ANNOUNCE_GAVE_UP,
    ANNOUNCE_REGISTERED,
)
from opentelemetry_exporter_userevents.record.tracepoints import announce_commands

_logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 2000
"""How long a writer waits for a machine-wide reader by default: a reader answers in
milliseconds, unless it is stalled."""
_gave_up_once = False
"""Set when a wait in this process timed out (a stalled reader, or the instance of a killed
one): later exporters of the process announce without waiting, so the process pays the
timeout once, not once per exporter."""
SLOW_START_MS = 500
"""How long a process's announcement waits may add up to before it warns, once: a machine-wide
reader answers each exporter in a few ms on a real machine, and its emulated test bed
(tens of times slower) measured 153.6 ms for a span and a log exporter (README,
"Performance"); past this, the reader is starved of a CPU (2,371 ms was seen on a loaded
host), and the app's start pays for it with no other word."""


class _SlowStart:
    """The process's announcement waits for a reader that then listened, and whether the
    warning was logged (it is set before: logged once, and a handler that exports it through
    one of our exporters cannot make it log again)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # exporters built on several threads warn once too
        self.waited = 0.0
        self.warned = False
        _forksafe.register(self)

    def add(self, waited: float) -> float | None:
        """Count ``waited`` seconds; the total, the first time it passes the bound."""
        with self._lock:
            self.waited += waited
            if self.warned or self.waited * 1000 <= SLOW_START_MS:
                return None
            self.warned = True
            return self.waited


_slow_start = _SlowStart()
_FIRST_STEP = 0.0005
_LAST_STEP = 0.01


@dataclass(frozen=True)
class Announcement:
    """What announcing did: ``listened`` is False when no machine-wide reader listens (then
    nothing was written or waited for); ``waited`` is in seconds."""

    listened: bool = False
    waited: float = 0.0
    gave_up: bool = False


def timeout_ms() -> int:
    """``OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT``; 0 turns announcements off."""
    text = os.environ.get(OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_MS
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 60_000:
        _logger.warning(
            "user_events exporter: %s=%r is not a whole number of ms in 0..60000; using %d",
            OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT,
            text,
            DEFAULT_TIMEOUT_MS,
        )
        return DEFAULT_TIMEOUT_MS
    return value


def announce(
    data: UserEventsData,
    prefix: str,
    registrations: Sequence[Registration | None],
    multi_format: bool,
) -> Announcement:
    """Announce ``prefix`` if a machine-wide reader listens, and wait until all of
    ``registrations`` are listened to or the timeout passes. Never raises."""
    global _gave_up_once
    wait_ms = timeout_ms()
    mine = [r for r in registrations if r is not None]
    if wait_ms == 0 or not mine or not data.available:
        return Announcement()
    multi, single = announce_commands()
    try:
        registration = data.register(
            multi if multi_format else single,
            USER_EVENT_REG_MULTI_FORMAT if multi_format else 0,
            single_format_command=single,
        )
    except UserEventsError as exc:  # a neighbour holds the single-format name: no reader
        _logger.debug("user_events: no announcement tracepoint: %s", exc)
        return Announcement()
    try:
        if not registration.enabled:
            return Announcement()
        started = time.monotonic()
        _write(registration, ANNOUNCE_REGISTERED, wait_ms, prefix)
        if _gave_up_once:  # that reader did not answer: a live one still rescans at once
            return Announcement(True, 0.0, True)
        deadline = started + wait_ms / 1000
        step = _FIRST_STEP
        while not all(r.enabled for r in mine):
            now = time.monotonic()
            if now >= deadline:
                _gave_up_once = True
                _write(registration, ANNOUNCE_GAVE_UP, wait_ms, prefix)
                _logger.warning(
                    "user_events: a machine-wide reader listens, but did not listen to "
                    "prefix %r within %d ms; what nobody listens to is not recorded",
                    prefix,
                    wait_ms,
                )
                return Announcement(True, now - started, True)
            time.sleep(min(step, deadline - now))
            step = min(step * 2, _LAST_STEP)
        # Another machine-wide reader heard the same record at the same moment; the enable
        # bits cannot say whether it listens yet. Waiting as long again lets one up to twice
        # as slow as the first catch up.
        waited = time.monotonic() - started
        time.sleep(max(0.0, min(waited, deadline - time.monotonic())))
        waited = time.monotonic() - started
        _count_wait(waited, prefix)
        return Announcement(True, waited)
    finally:
        try:
            registration.unregister()
        except UserEventsError:
            pass


def _count_wait(waited: float, prefix: str) -> None:
    """Add a wait to the process's total; warn, once per process, when the total passes
    :data:`SLOW_START_MS`."""
    total = _slow_start.add(waited)
    if total is None:
        return
    _logger.warning(
        "user_events: waiting for a machine-wide reader (otel-userevents --prefix '*') to "
        "listen has slowed this process's start by %d ms (more than %d ms; prefix %r waited "
        "%d ms): the reader is slow to answer. Give it a CPU of its own, or lower "
        "OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT (0: no wait, and that reader may miss "
        "the first records)",
        total * 1000,
        SLOW_START_MS,
        prefix,
        waited * 1000,
    )


def _write(registration: Registration, event: int, wait_ms: int, prefix: str) -> None:
    try:
        registration.write(ANNOUNCE.pack((wait_ms, event), (prefix.encode(),)))
    except UserEventsError as exc:
        if exc.errno != errno.EBADF:  # EBADF: the reader detached meanwhile
            _logger.debug("user_events: announcement not written: %s", exc)
