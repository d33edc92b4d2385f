# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Announcements answered on a thread of their own, whatever the reader's main loop does.

An announcing writer waits, up to its timeout (2 s by default), until its tracepoints are
listened to. The reader's main loop reads, decodes, joins and writes: a down collector or a
slow output holds it for seconds. So this thread waits on the announcement instance
(``poll``), reads each announcement and has the announced prefixes' tracepoints enabled at
once. It starts the periodic rescan (services that do not announce) on a thread of its own
(:mod:`.rescan_thread`), so an answer waits neither for the main loop nor for a listing of
every user_events name. Both share the reader's lock, which the reader holds for one read
of announcements or one enabling, never across the main loop's work or a listing: an
announcement is answered within the writer's wait (2 s by default) whatever the number of
names on the machine.

Any local writer may write announcements, so a flood costs a bounded amount: at most
:data:`MAX_ANSWERED_PER_SECOND` prefixes are looked up per second, after a burst of as many;
the others wait their turn (counted in ``deferred``), at most :data:`MAX_PENDING` of them
(beyond, counted in ``dropped``: the next full listing still finds their tracepoints, as
their registration changed the signal it waits for).
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry_exporter_userevents.reader.live.announcements import AnnouncementListener
from opentelemetry_exporter_userevents.reader.live.rescan_thread import RescanThread

MAX_ANSWERED_PER_SECOND = 32
"""Announced prefixes looked up per second (each at most ``12 * (2 + MULTI_PROBE_IDS)``
``stat`` calls, :mod:`.announced_tracepoints`; 8 ms for one with 10,000 other names in a
directory tree on tmpfs, where the listing it replaces took 220 ms), after a burst of as
many."""
MAX_PENDING = 1024
"""Announced prefixes waiting for their turn; beyond, new ones are dropped and counted."""
STOP_TIMEOUT = 5.0
"""Seconds :meth:`AnnouncementThread.stop` waits for the thread (one look-up)."""


@dataclass
class AnswerStats:
    answered: int = 0
    """Announced prefixes looked up."""
    deferred: int = 0
    """Announced prefixes that waited for their turn (over the rate)."""
    dropped: int = 0
    """Announced prefixes not kept (over :data:`MAX_PENDING` waiting)."""


class _Budget:
    """A token bucket: ``rate`` a second, at most ``rate`` at once."""

    def __init__(self, rate: int, now: float | None = None) -> None:
        self.rate = rate
        self.tokens = float(rate)
        self.at = time.monotonic() if now is None else now

    def take(self, now: float) -> bool:
        self.tokens = min(float(self.rate), self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def wait(self) -> float:
        """Seconds until the next token (after :meth:`take` was refused)."""
        return max(0.0, (1.0 - self.tokens) / self.rate)


class AnnouncementThread:
    """Reads announcements as they come and answers them; stop it before closing the
    listener."""

    def __init__(
        self,
        listener: AnnouncementListener,
        lock: threading.Lock,
        announced: Callable[[set[int]], None],
        answer: Callable[[set[str]], object],
        rescan: Callable[[], object],
        rescan_interval: float,
        rate: int = MAX_ANSWERED_PER_SECOND,
        now: float | None = None,
    ) -> None:
        """``announced(pids)``: called with the writers of what was just read, before any
        look-up; ``answer(prefixes)``: enable their tracepoints; ``rescan()``: called every
        ``rescan_interval`` seconds on the rescan thread (:mod:`.rescan_schedule` decides
        whether it lists every name). ``now``: the rate's clock starts then
        (tests)."""
        self.listener = listener
        self.lock = lock
        self.announced = announced
        self.answer = answer
        self.rescans = RescanThread(rescan, rescan_interval, self._failed)
        self.stats = AnswerStats()
        self.error: str | None = None
        """Why the thread stopped before it was asked to (the main loop answers then)."""
        self._budget = _Budget(rate, now)
        self._pending: dict[str, None] = {}
        self._stopping = False
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(
            target=self._run, name="otel-userevents-announcements", daemon=True
        )

    @property
    def running(self) -> bool:
        """Both threads run (if one fails, the other stops: the main loop does both)."""
        return self._thread.is_alive() and self.rescans.running

    def start(self) -> None:
        self._thread.start()
        self.rescans.start()

    def stop(self) -> None:
        """Wake the thread, wait for it (idempotent)."""
        if self._wake_write < 0:
            return
        self._stopping = True
        os.write(self._wake_write, b"x")
        self.rescans.stop()
        if self._thread.is_alive():
            self._thread.join(STOP_TIMEOUT)
        os.close(self._wake_write)
        os.close(self._wake_read)
        self._wake_write = self._wake_read = -1

    def _failed(self, why: str) -> None:
        """One thread failed: say why, and stop the other (the main loop does both)."""
        if self.error is None:
            self.error = why
        self._stopping = True
        try:
            os.write(self._wake_write, b"x")
        except OSError:
            pass  # stopped meanwhile

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as error:  # noqa: BLE001 - said, and the main loop takes over
            self.error = f"announcements are answered by the main loop: {error!r}"
            self.rescans.stop()

    def _loop(self) -> None:
        poll = select.poll()
        self.listener.pipes.register(poll)
        poll.register(self._wake_read, select.POLLIN)
        while not self._stopping:
            timeout = self._budget.wait() * 1000 if self._pending else None
            poll.poll(timeout)
            if self._stopping:
                return
            with self.lock:
                heard = self.listener.read()
                pids = set(self.listener.heard_pids)
            if pids:
                self.announced(pids)
            self.take_in(heard, time.monotonic())

    def take_in(self, heard: set[str], now: float) -> None:
        """Queue the prefixes just heard and answer as many waiting ones as the rate
        allows (the oldest first); count those that must wait, and those not kept."""
        new = []
        for prefix in heard:
            if prefix in self._pending:
                continue
            if len(self._pending) >= MAX_PENDING:
                self.stats.dropped += 1
                continue
            self._pending[prefix] = None
            new.append(prefix)
        self._answer_pending(now)
        self.stats.deferred += sum(1 for prefix in new if prefix in self._pending)

    @property
    def pending(self) -> int:
        """Announced prefixes waiting for their turn."""
        return len(self._pending)

    def _answer_pending(self, now: float) -> None:
        turn: set[str] = set()
        for prefix in self._pending:
            if not self._budget.take(now):
                break
            turn.add(prefix)
        for prefix in turn:
            del self._pending[prefix]
        if turn:
            self.stats.answered += len(turn)
            self.answer(turn)
