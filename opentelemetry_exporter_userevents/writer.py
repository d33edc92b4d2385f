# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The write side shared by the exporters: registrations, writes, and exact counts."""

from __future__ import annotations

import errno
import logging
import os
import threading
from dataclasses import dataclass, fields

from opentelemetry_exporter_userevents.abi import (
    Registration,
    UserEventsData,
    UserEventsError,
)

_logger = logging.getLogger(__name__)
_warned_unavailable = False


@dataclass
class ExportStats:
    """Counts of what an exporter did with the records handed to it."""

    written: int = 0
    """Records the kernel accepted."""
    not_listened: int = 0
    """Records skipped because no tracer was attached: nothing was encoded."""
    dropped_detached: int = 0
    """Records dropped because the last tracer detached between the check and the write."""
    dropped_invalid: int = 0
    """Records dropped because a value could not be encoded (logged once per kind)."""
    dropped_unregistered: int = 0
    """Records for a tracepoint that could not be registered (logged at construction)."""
    dropped_write_error: int = 0
    """Records the kernel refused for another reason (logged)."""
    truncated: int = 0
    """Records written with parts cut to fit the size limit (marked in the record)."""

    def snapshot(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class EventWriter:
    """Registers an exporter's tracepoints and writes records to them.

    When user_events cannot be used, it logs one warning per process and every
    registration is None: the exporter becomes a no-op.
    """

    def __init__(self, tracefs: str | None, commands: dict[str, str]) -> None:
        self.stats = ExportStats()
        self._lock = threading.Lock()
        self._data = UserEventsData(tracefs)
        self.registrations: dict[str, Registration | None] = dict.fromkeys(commands)
        if not self._data.available:
            _warn_unavailable(self._data.reason or "unknown reason")
            return
        for key, command in commands.items():
            try:
                self.registrations[key] = self._data.register(command)
            except UserEventsError as exc:
                _logger.warning("user_events: cannot register %s; it is disabled", exc)

    @property
    def available(self) -> bool:
        return self._data.available

    def write(self, registration: Registration, payload: bytes) -> bool:
        """Write one record; count it written or dropped (never raises)."""
        try:
            os.writev(self._data.fd, (registration.index_bytes, payload))
        except OSError as exc:
            with self._lock:
                if exc.errno == errno.EBADF and self._data.available:
                    self.stats.dropped_detached += 1
                else:
                    self.stats.dropped_write_error += 1
            if exc.errno != errno.EBADF:
                _logger.warning(
                    "user_events: %s",
                    UserEventsError("write", exc.errno or 0, registration.command),
                )
            return False
        with self._lock:
            self.stats.written += 1
        return True

    def count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self.stats, name, getattr(self.stats, name) + amount)

    def close(self) -> None:
        self._data.close()


def _warn_unavailable(reason: str) -> None:
    global _warned_unavailable
    if not _warned_unavailable:
        _warned_unavailable = True
        _logger.warning("user_events exporter disabled, it will export nothing: %s", reason)
