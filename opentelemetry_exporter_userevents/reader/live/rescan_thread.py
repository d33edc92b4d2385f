# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The periodic rescan on a thread of its own: however long a listing of every user_events
name takes, the thread that answers announcements (:mod:`.announcement_thread`) never waits
for it. The rescan holds the reader's lock only while it enables what it found, and its
Python work gives way to the answering thread at each switch interval of the interpreter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

STOP_TIMEOUT = 5.0
"""Seconds :meth:`RescanThread.stop` waits for the thread (the end of one rescan)."""


class RescanThread:
    """Calls ``rescan()`` every ``interval`` seconds until stopped (it decides whether to
    list every name: :mod:`.rescan_schedule`)."""

    def __init__(
        self,
        rescan: Callable[[], object],
        interval: float,
        failed: Callable[[str], None],
    ) -> None:
        """``failed(why)``: called once if a rescan raises (the thread then stops)."""
        self.rescan = rescan
        self.interval = interval
        self.failed = failed
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="otel-userevents-rescan", daemon=True
        )

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to stop and wait for it (idempotent)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(STOP_TIMEOUT)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                self.rescan()
        except Exception as error:  # noqa: BLE001 - said, and the main loop takes over
            self.failed(f"rescans are run by the main loop: {error!r}")
