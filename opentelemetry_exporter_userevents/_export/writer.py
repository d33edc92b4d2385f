# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The write side shared by the exporters: registrations, writes, and exact counts."""

from __future__ import annotations

import errno
import logging
import os
import threading
from dataclasses import dataclass, fields

from opentelemetry_exporter_userevents import _forksafe
from opentelemetry_exporter_userevents._export.announce import Announcement, announce
from opentelemetry_exporter_userevents.abi.errors import UserEventsError
from opentelemetry_exporter_userevents.abi.uapi import (
    USER_EVENT_REG_MULTI_FORMAT,
    USER_EVENTS_SYSTEM,
)
from opentelemetry_exporter_userevents.abi.user_events import Registration, UserEventsData
from opentelemetry_exporter_userevents.record.schema import Schema
from opentelemetry_exporter_userevents.record.tracepoints import commands, parse_tracepoint

_logger = logging.getLogger(__name__)
_ALWAYS = memoryview(b"\xff\xff\xff\xff").cast("I")
_warned_unavailable = False


@dataclass
class ExportStats:
    """Counts of what an exporter did with the records handed to it.

    Thread-safe: every count changes under one lock, and :meth:`snapshot` reads all of them
    under it. Each record handed to an exporter adds 1 to exactly one of ``written``,
    ``not_listened`` and the ``dropped_*`` counts, and so does each resource record the
    exporter writes on its own (docs/schema.md); ``truncated`` counts written records.
    """

    written: int = 0
    """Records the kernel accepted."""
    not_listened: int = 0
    """Records skipped because no tracer was attached: nothing was encoded."""
    dropped_detached: int = 0
    """Records dropped because the last tracer detached between the check and the write."""
    dropped_invalid: int = 0
    """Records dropped because a value could not be encoded, or because an ``otlp_metrics``
    request (which is never cut) was over its size limit (logged once per kind)."""
    dropped_unregistered: int = 0
    """Records for a tracepoint that could not be registered (logged at construction)."""
    dropped_write_error: int = 0
    """Records the kernel refused for another reason (logged once per errno)."""
    dropped_shutdown: int = 0
    """Records handed to the exporter after its shutdown, or while it shut down (never
    written to the descriptor it closed)."""
    truncated: int = 0
    """Records written with parts cut to fit the size limit (marked in the record)."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        _forksafe.register(self)

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + amount)

    def snapshot(self) -> dict[str, int]:
        """Every count, read at one instant."""
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def dropped(self) -> int:
        """All dropped records, whatever the reason."""
        counts = self.snapshot()
        return sum(value for name, value in counts.items() if name.startswith("dropped_"))


class EventWriter:
    """Registers an exporter's tracepoints and writes records to them.

    When user_events cannot be used, it logs one warning per process and every
    registration is None: the exporter becomes a no-op.
    """

    def __init__(
        self,
        tracefs: str | None,
        tracepoints: dict[str, tuple[str, Schema]],
        multi_format: bool = True,
        data_path: str | None = None,
        refused: bool = False,
    ) -> None:
        """``tracepoints``: key -> (base name, schema). Each registers multi-format where
        the kernel can and ``multi_format`` is True, else under its versioned
        single-format name (record.tracepoints). ``refused``: settings the caller refused
        (and said why): nothing is registered, the writer is a no-op."""
        self.stats = ExportStats()
        self._reported: set[object] = set()
        self._data = UserEventsData(tracefs, data_path)
        self.registrations: dict[str, Registration | None] = dict.fromkeys(tracepoints)
        self.announcement = Announcement()
        if refused:  # nothing to write: the file is let go at once
            self._data.close()
            return
        if not self._data.available:
            _warn_unavailable(self._data.reason or "unknown reason")
            return
        flags = USER_EVENT_REG_MULTI_FORMAT if multi_format else 0
        for key, (base, schema) in tracepoints.items():
            multi, single = commands(base, schema)
            try:
                self.registrations[key] = self._data.register(
                    multi if multi_format else single, flags, single_format_command=single
                )
            except UserEventsError as exc:
                _logger.warning(
                    "user_events: cannot register %s%s; its records are dropped and counted "
                    "in dropped_unregistered",
                    exc,
                    self._holder(exc),
                )
        self.announcement = _announce(self._data, tracepoints, self.registrations, multi_format)
        """Whether a machine-wide reader listened at start, and how long we waited for it."""

    def _holder(self, error: UserEventsError) -> str:
        """For a single-format name another program holds with other fields (EADDRINUSE),
        that program's format as tracefs shows it; else nothing."""
        tracefs = self._data.tracefs
        if error.errno != errno.EADDRINUSE or tracefs is None:
            return ""
        name = error.command.split(" ", 1)[0]
        try:
            fmt = tracefs.read_format(USER_EVENTS_SYSTEM, name)
        except (OSError, ValueError):
            return f" (user_events/{name} is held by another program's format)"
        fields = "; ".join(f"{f.type} {f.name}" for f in fmt.fields)
        return f" (user_events/{name} is held by another program's format: {fields})"

    @property
    def available(self) -> bool:
        return self._data.available

    def shared_enable_word(self, registrations: list[Registration | None]) -> memoryview:
        """A word that is non-zero while any of ``registrations`` is listened to
        (:meth:`UserEventsData.shared_enable_word`). If the kernel refuses it, a word that
        is always non-zero: each registration's own word then decides, as before."""
        try:
            return self._data.shared_enable_word(registrations)
        except UserEventsError as exc:
            _logger.warning("user_events: no shared enable word (%s); each is read alone", exc)
            return _ALWAYS

    def write(self, registration: Registration, payload: bytes) -> bool:
        """Write one record; count it written or dropped (never raises an OSError)."""
        try:
            registration.write(payload)
        except UserEventsError as exc:
            self._count_failure(registration, exc.errno or errno.EIO)
            return False
        stats = self.stats
        with stats._lock:
            stats.written += 1
        return True

    def _count_failure(self, registration: Registration, err: int) -> None:
        if err == errno.EBADF and self._data.closed:
            self.stats.add("dropped_shutdown")  # shut down while this record was on its way
            return
        if err == errno.EBADF and self._data.available and not _closed(self._data.fd):
            self.stats.add("dropped_detached")  # expected: a listener detached
            return
        self.stats.add("dropped_write_error")
        if err == errno.EBADF:
            self.report(
                ("closed", err),
                "user_events: the user_events_data file descriptor was closed by other code; "
                "records are dropped and counted in dropped_write_error",
            )
        else:
            self.report(err, "user_events: %s", UserEventsError("write", err, registration.command))

    def count(self, name: str, amount: int = 1) -> None:
        self.stats.add(name, amount)

    def report(self, key: object, message: str, *args: object, exc_info: bool = False) -> None:
        """Log a problem at WARNING the first time ``key`` is seen, at DEBUG afterwards, so a
        persistent fault cannot flood the application's log (the stats count every one)."""
        first = key not in self._reported
        if first:
            self._reported.add(key)
        _logger.log(logging.WARNING if first else logging.DEBUG, message, *args, exc_info=exc_info)

    def close(self) -> None:
        self._data.close()


def _announce(
    data: UserEventsData,
    tracepoints: dict[str, tuple[str, Schema]],
    registrations: dict[str, Registration | None],
    multi_format: bool,
) -> Announcement:
    """Tell a machine-wide reader about our tracepoints (:mod:`.announce`), by their prefix."""
    prefixes = {
        parsed.prefix for base, _ in tracepoints.values() if (parsed := parse_tracepoint(base))
    }
    if len(prefixes) != 1:
        return Announcement()
    return announce(data, prefixes.pop(), list(registrations.values()), multi_format)


def _closed(fd: int) -> bool:
    """True if ``fd`` is no longer open (someone closed it under us)."""
    try:
        os.fstat(fd)
    except OSError as exc:
        return exc.errno == errno.EBADF
    return False


def _warn_unavailable(reason: str) -> None:
    global _warned_unavailable
    if not _warned_unavailable:
        _warned_unavailable = True
        _logger.warning("user_events exporter disabled, it will export nothing: %s", reason)
