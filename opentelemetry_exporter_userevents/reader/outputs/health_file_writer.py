# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The health file (``--spool DIR``'s ``health.json``, for ``status``) written off the read
loop: a disk that stalls must not stall reading (issue 44).

:meth:`HealthFileWriter.offer` never waits: it leaves the newest snapshot for a thread of
its own, replacing one not yet written (only the newest matters: the file is replaced
whole). :meth:`HealthFileWriter.finish` waits for the last one until a deadline, and
returns at the deadline with the disk still stalled (the thread is a daemon thread: it
cannot keep the process from exiting)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class HealthFileWriter(Generic[T]):
    """Writes each snapshot offered with ``write(directory, snapshot)``, the newest only."""

    def __init__(self, directory: str, write: Callable[[str, T], None]) -> None:
        self.directory = directory
        self._write = write
        self._changed = threading.Condition(threading.Lock())
        self._pending: T | None = None
        self._writing = False
        self.replaced = 0
        """Snapshots replaced by a newer one before they were written (a slow disk)."""
        self.error: str | None = None
        """Why the health file could not be written (the first time), for the summary."""
        self._thread = threading.Thread(
            target=self._run, name="otel-userevents health file", daemon=True
        )
        self._thread.start()

    def offer(self, snapshot: T) -> None:
        """The newest snapshot, to be written; never waits on the disk."""
        with self._changed:
            if self._pending is not None:
                self.replaced += 1
            self._pending = snapshot
            self._changed.notify_all()

    def finish(self, deadline: float) -> bool:
        """Wait until what was offered is written, or ``deadline`` (monotonic): whether it
        was."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self._pending is None and not self._writing,
                max(0.0, deadline - time.monotonic()),
            )

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending is not None)
                snapshot, self._pending = self._pending, None
                self._writing = True
            try:
                if snapshot is not None:
                    self._write(self.directory, snapshot)
            except OSError as error:
                self.error = self.error or f"health file not written: {error}"
            finally:
                with self._changed:
                    self._writing = False
                    self._changed.notify_all()
