# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The output as a stage of its own: a thread that owns the :class:`~.output.Output` and
calls its ``write`` and ``close``, fed through a :class:`~.bounded_queue.BoundedQueue`.

The queue is the reader's ``sending_queue`` (in memory), bounded in batches and in
estimated bytes (``--sending-queue-size``, ``--sending-queue-max-mb``; :mod:`.batch_bytes`);
when it is full the oldest batches are dropped for the new one, as the Collector keeps the
newest, counted (``output: queue full (oldest dropped)``). :meth:`OutputStage.ledger` puts
every item handed to it in one bucket (:mod:`.delivery_ledger`).

The read loop hands each batch to :meth:`OutputStage.write`, which never waits: a collector
that is slow, refuses connections or never answers cannot keep the reader from its buffers
(or from listening to an app that announces itself). Stopping has a deadline: the stage
drains until then, and what it has not delivered by then (queued, or in the output's
hands) is counted as not delivered; its thread is a daemon thread, so a stuck third-party
exporter cannot keep the process from exiting.

Every item handed to the stage is counted once: written (handed to the output's ``write``,
which counts in ``failed`` what it could not write), dropped by reason (``output: queue
full``), or not delivered at stop; until then it is queued or in flight.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord, Telemetry
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper import delivery
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.batch_bytes import (
    estimated_bytes,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.bounded_queue import (
    OLDEST_DROPPED,
    BoundedQueue,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery_ledger import (
    Ledger,
    SpoolCounts,
    StageCounts,
    ledger,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Spool
from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_items import (
    is_sdk_log,
    is_sdk_span,
)
from opentelemetry_exporter_userevents.reader.outputs.output import Output

STAGE = "output"
MAX_QUEUED_BATCHES = 1000
"""Batches queued for the output (the Collector's ``queue_size`` default); with
:data:`MAX_BATCH_ITEMS`, at most 512,000 items, and :data:`MAX_QUEUED_BYTES` bounds them."""
MAX_QUEUED_BYTES = 64 * 1024 * 1024
"""Estimated bytes queued for the output (:func:`estimated_bytes`): within the reader's
memory limit with room for everything else."""
MAX_BATCH_ITEMS = 512
"""A read's items go to the queue in batches of at most this many, so one busy read is
never dropped whole and no batch is near the byte bound alone."""
OLDEST_REASON = f"{STAGE}: {OLDEST_DROPPED}"
NOT_DELIVERED = "stop timeout"
"""Why items counted at stop were not delivered."""
KINDS = ("spans", "logs", "metric points")
SPOOL_RESERVE = 2.0
"""Seconds at most, of the time the stop has, kept to spool what was not delivered (at
most a quarter of the time left)."""
IDLE_SECONDS = 5.0
"""With nothing to write for this long, the output's ``idle`` runs (a spool is tried)."""


def kind_of(item: Telemetry) -> str:
    if type(item) is JoinedRecord:
        return "spans" if item.is_span else "logs"  # checked, or encoded where decoded
    if type(item) is MetricPoint:  # told by type: the SDK's classes are looked up below
        return "metric points"
    if is_sdk_span(item):
        return "spans"
    return "logs" if is_sdk_log(item) else "metric points"


class OutputStage:
    """An :class:`~.output.Output` whose ``write`` queues and returns at once (the same
    protocol: the read loop does not change); ``close`` drains until the stop deadline."""

    def __init__(
        self,
        output: Output,
        stop_timeout: float,
        max_batches: int = MAX_QUEUED_BATCHES,
        max_bytes: int = MAX_QUEUED_BYTES,
        drop_oldest: bool = True,
    ) -> None:
        self.output = output
        self.drop_oldest = drop_oldest
        """A full queue drops its oldest batches for the new one (the Collector's sending
        queue); False: the new one is dropped. Counted either way, by reason."""
        self.stop_timeout = stop_timeout
        self.failed = 0
        """The output's ``failed``, and batches its ``write`` raised for; updated by the
        stage's thread after each write."""
        self.queue: BoundedQueue[tuple[list[Telemetry], Counter[str]]] = BoundedQueue(
            STAGE, max_batches, max_bytes
        )
        if hasattr(output, "backlog"):  # the spool drains while nothing waits
            output.backlog = lambda: self.queue.counts()[0]
        self.deadline: float | None = None
        """When stopping ends (monotonic); set by :meth:`stop_by` or :meth:`close`."""
        self._lock = threading.Lock()
        self._queued: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self._in_flight_batch: list[Telemetry] | None = None
        """The batch in the output's ``write``: its ``progress`` tells what of it ended."""
        self.written: Counter[str] = Counter()
        self.handed: Counter[str] = Counter()
        """Items handed to :meth:`write`, by kind: the ledger's *written*."""
        self.exported_otherwise = 0
        """Items an SDK exporter took (the output's ``exported_otherwise``), as of its last
        write."""
        self._spool_counts: SpoolCounts | None = None
        """The spool's ledger counts, taken with the output's (one snapshot)."""
        self.dropped: dict[str, Counter[str]] = {}
        """Items by kind, by ``stage: reason``."""
        self.not_delivered: Counter[str] = Counter()
        self.spooled_at_stop: Counter[str] = Counter()
        """Items not delivered by the stop deadline, written to the spool instead (the
        summary counts them with the spool's ``spooled``)."""
        self.failed_by_reason: Counter[str] = Counter()
        """Of ``failed``, what the output says why (``failed_by_reason()``, if it has one:
        the OTLP/HTTP senders), as of its last write."""
        self.delivered: dict[str, tuple[int, Counter[str], Any]] = {}
        """Per sender kind (``spans``, ``logs``, ``metrics``), records the collector took,
        failed ones by reason and each POST's durations (``delivered()``, if the output has
        it: the OTLP/HTTP senders), as of its last write."""
        self._raised = 0
        self._stopped = False
        self._done = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="otel-userevents output")
        self._thread.daemon = True  # a stuck exporter must not keep the process alive
        self._thread.start()

    def write(self, items: Sequence[Telemetry]) -> None:
        """Queue ``items`` in batches; never waits (after :meth:`stop_by`, waits for room
        until the deadline: reading has stopped)."""
        for start in range(0, len(items), MAX_BATCH_ITEMS):
            batch = list(items[start : start + MAX_BATCH_ITEMS])
            kinds = Counter(kind_of(item) for item in batch)
            with self._lock:  # counted first: the thread may take it at once
                self._queued.update(kinds)
                self.handed.update(kinds)
            size = estimated_bytes(batch)
            if self.drop_oldest and self.deadline is None:
                reason, taken = self.queue.put_newest((batch, kinds), size)
                if taken:
                    with self._lock:
                        for _old, old_kinds in taken:
                            self._queued.subtract(old_kinds)
                            self.dropped.setdefault(OLDEST_REASON, Counter()).update(old_kinds)
            else:
                reason = self.queue.put((batch, kinds), size, self.deadline)
            if reason is not None:
                with self._lock:
                    self._queued.subtract(kinds)
                    self.dropped.setdefault(reason, Counter()).update(kinds)

    def _run(self) -> None:
        output = self.output
        idle = getattr(output, "idle", None)
        while True:
            queued = self.queue.get(IDLE_SECONDS if callable(idle) else None)
            if queued is None:
                if self._closing.is_set() or not callable(idle):
                    break
                try:
                    idle()  # nothing came: a spool's requests, if the collector takes them
                except Exception:  # noqa: BLE001 - what stays spooled is tried again later
                    pass
                with self._lock:
                    self._take_counts(output)
                continue
            batch, kinds = queued
            with self._lock:
                if self._stopped:
                    return  # counted as not delivered at stop
                self._queued.subtract(kinds)
                self._in_flight = kinds
                self._in_flight_batch = batch
            try:
                output.write(batch)
            except Exception:  # noqa: BLE001 - an output that raises loses its batch, counted
                self._raised += len(batch)
            with self._lock:
                if self._stopped:
                    return  # the whole batch was counted as not delivered at stop
                self._in_flight = Counter()
                self._in_flight_batch = None
                self.written.update(kinds)
                self._take_counts(output)
        try:
            output.close()
        except Exception:  # noqa: BLE001 - a third-party exporter's shutdown; nothing is lost
            pass
        finally:
            with self._lock:
                if not self._stopped:
                    self._take_counts(output)
            self._done.set()

    def _take_counts(self, output: Output) -> None:
        """The output's counts, copied on the stage's thread (with the lock held)."""
        self.failed = output.failed + self._raised
        self.failed_by_reason = _failed_by_reason(output)
        self.delivered = _delivered(output)
        self.exported_otherwise = getattr(output, "exported_otherwise", 0)
        spool = getattr(output, "spool", None)
        self._spool_counts = spool.ledger_counts() if isinstance(spool, Spool) else None

    def health_counts(
        self,
    ) -> tuple[dict[str, Counter[str]], Counter[str], dict[str, tuple[int, Counter[str], Any]]]:
        """For :mod:`.health_metrics`: items dropped by ``stage: reason`` and by kind, not
        delivered at stop by kind, and what the output's senders delivered (``delivered``)."""
        with self._lock:
            return (
                {reason: Counter(kinds) for reason, kinds in self.dropped.items()},
                Counter(self.not_delivered),
                dict(self.delivered),
            )

    def wait_idle(self, deadline: float, poll: float = 0.01) -> bool:
        """Wait until nothing is queued or in flight, or ``deadline`` (monotonic): whether
        it is (at stop, so that the last counts include what was delivered)."""
        while True:
            batches, waiting = self.counts()
            if not batches and not waiting:
                return True
            if time.monotonic() >= deadline or self._done.is_set():
                return False
            time.sleep(poll)

    @property
    def finished(self) -> bool:
        """Whether the stage's thread has ended (the output closed): nothing of the output's
        is in use any more."""
        return self._done.is_set()

    def stop_by(self, deadline: float) -> None:
        """Reading has stopped: the last writes may wait for room until ``deadline``, and
        :meth:`close` drains until then."""
        self.deadline = deadline

    def close(self) -> None:
        """Deliver what is queued until the deadline (:meth:`stop_by`; else now plus the stop
        timeout), then count what was not delivered and return, even if the output is stuck.

        With a spool, the last part of the time left (:data:`SPOOL_RESERVE` s at most, a
        quarter of it at most) is kept to spool what was not delivered; the spooling runs
        on a thread of its own, and what it has not spooled by the deadline (a disk that
        stalls) is counted as not delivered, its writes abandoned (never put in place
        later): the stop meets its deadline whatever the disk does."""
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.stop_timeout
        deadline = self.deadline
        spool = getattr(self.output, "spool", None)
        reserve = min(SPOOL_RESERVE, max(0.0, deadline - now) / 4) if spool is not None else 0
        self._closing.set()
        self.queue.close()
        self._done.wait(max(0.0, deadline - reserve - time.monotonic()))
        with self._lock:
            if self._done.is_set():
                return
            self._stopped = True
            left = Counter(self._in_flight)
            left.subtract(_finished(self.output, self._in_flight_batch))
            left.update(self._queued)
            self._in_flight = Counter()  # counted now: delivered, failed or in ``left``
            if isinstance(spool, Spool):
                spool.hold_for(0)  # the output's thread, under way, changes no count now
            try:  # what the output's senders delivered of the batch in flight counts too
                self._take_counts(self.output)
            except Exception:  # noqa: BLE001 - counts of a stuck output: as of its last write
                pass
            batches = self.queue.take_all()
            self._queued = Counter()
        spooled = self._spool_left([batch for batch, _kinds in batches], deadline)
        if isinstance(spool, Spool):
            spool.abandon()  # the output's thread, still under way, spools nothing more: the
            # stop spooled its request in flight (else it would be there twice)
        with self._lock:
            self.spooled_at_stop.update(+spooled)
            left.subtract(spooled)
            self.not_delivered.update(+left)  # ``failed`` stays as before this batch
            if isinstance(spool, Spool):
                self._spool_counts = spool.ledger_counts()

    def _spool_left(self, batches: list[list[Telemetry]], deadline: float) -> Counter[str]:
        """With a spool, what the output did not deliver by the deadline goes to it: the
        requests in flight, then the batches queued (on a thread of its own: the output's
        may be stuck, the disk may stall), until ``deadline``; the items spooled by then,
        by kind."""
        output = self.output
        spool = getattr(output, "spool", None)
        if spool is None:
            return Counter()
        spooled: Counter[str] = Counter()
        lock = threading.Lock()

        def spool_all() -> None:
            try:
                if isinstance(spool, Spool):
                    spool.hold_for(threading.get_ident())  # this thread only, from now on
                done = output.spool_in_flight()  # type: ignore[attr-defined]
                with lock:
                    spooled.update(done)
                for batch in batches:
                    done = output.spool_batch(batch)  # type: ignore[attr-defined]
                    with lock:
                        spooled.update(done)
            except Exception:  # noqa: BLE001 - the rest is counted as not delivered
                pass

        thread = threading.Thread(target=spool_all, name="otel-userevents spool at stop")
        thread.daemon = True  # a disk stalled in fsync must not keep the process alive
        thread.start()
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            try:
                spool.abandon()  # what is still being written is not put in place later
            except Exception:  # noqa: BLE001 - a spool of another kind; counted all the same
                pass
        with lock:
            return Counter(spooled)

    def ledger(self) -> Ledger:
        """Every item handed to the stage in one bucket (:mod:`.delivery_ledger`), one
        snapshot: the output's counts and the spool's as of its last write, the queue's now."""
        with self._lock:
            delivered = sum(taken for taken, _failed, _durations in self.delivered.values())
            if not callable(getattr(self.output, "delivered", None)):  # a file, a tree view
                delivered = sum(self.written.values()) - self.failed
            waiting = sum(self._queued.values()) + sum(self._in_flight.values())
            dropped = {reason: sum(kinds.values()) for reason, kinds in self.dropped.items()}
            return ledger(
                StageCounts(sum(self.handed.values()), delivered + self.exported_otherwise,
                            self.failed, dropped, sum(self.not_delivered.values()), waiting,
                            self._spool_counts)
            )  # fmt: skip

    def counts(self) -> tuple[int, Counter[str]]:
        """Batches queued, and the items queued or in flight by kind."""
        batches, _bytes, _dropped = self.queue.counts()
        with self._lock:
            waiting = Counter(self._queued)
            waiting.update(self._in_flight)
        return batches, +waiting

    def parts(self) -> list[str]:
        """For the progress line and the summary: what waits for the output, what was
        dropped on the way (by reason) and what was not delivered; nothing when all is well."""
        batches, waiting = self.counts()
        with self._lock:
            dropped = {reason: +kinds for reason, kinds in self.dropped.items()}
            not_delivered = +self.not_delivered
            failed_by_reason = +self.failed_by_reason
        parts = [
            f"{count} not written: {reason}" for reason, count in sorted(failed_by_reason.items())
        ]
        if batches or waiting:
            parts.append(f"{_items(waiting)} queued for the output ({batches} batches)")
        for reason, kinds in sorted(dropped.items()):
            if kinds:
                parts.append(f"{_items(kinds)} dropped ({reason})")
        if not_delivered:
            parts.append(f"{_items(not_delivered)} not delivered: {NOT_DELIVERED}")

        capped = getattr(getattr(self.output, "throttle", None), "capped", 0)
        if type(capped) is int and capped:
            parts.append(
                f"{capped} collector delays (Retry-After, RetryInfo) cut to "
                f"{delivery.MAX_RETRY_AFTER:.0f} s"
            )
        spool = getattr(self.output, "spool", None)
        if isinstance(spool, Spool):
            parts += spool_parts(spool)
        return parts


def spool_parts(spool: Spool) -> list[str]:
    """What the spool took, re-sent, dropped and holds."""
    spooled, resent, dropped, unwritten, damaged = spool.totals()
    segments, size = spool.counts()
    parts = []
    for label, count in (
        ("spooled (the collector did not take them in time)", spooled),
        ("re-sent from the spool", resent),
        ("dropped (spool full: oldest first)", dropped),
        ("dropped (the spool could not be written: disk full or I/O error)", unwritten),
    ):
        if count:
            parts.append(f"{_items(_kinds(count))} {label}")
    if damaged:
        parts.append(f"{damaged} damaged spool segments skipped")
    if segments:
        left = f": {_items(_kinds(spool.left()))}" if spool.left() else ""
        parts.append(f"{segments} requests ({size / 1048576:.1f} MiB) left in the spool{left}")
    return parts


def _kinds(counts: Counter[str]) -> Counter[str]:
    """The spool's kinds as the summary names them."""
    return Counter({"metric points" if k == "metrics" else k: n for k, n in counts.items()})


def _finished(output: Output, batch: list[Telemetry] | None) -> Counter[str]:
    """Of ``batch``, in the output's ``write``, the items whose requests ended (taken, or
    failed and counted in ``failed``), by kind: its ``progress``, if it keeps one for that
    batch (a half-sent batch at stop: its spans taken, its logs not)."""
    progress = getattr(output, "progress", None)
    if batch is None or not isinstance(progress, tuple) or progress[0] is not batch:
        return Counter()
    return Counter(progress[1])


def _failed_by_reason(output: Output) -> Counter[str]:
    """The output's failures by reason, if it counts them (on the stage's thread)."""
    by_reason = getattr(output, "failed_by_reason", None)
    if not callable(by_reason):
        return Counter()
    try:
        return Counter(by_reason())
    except Exception:  # noqa: BLE001 - the total in ``failed`` stays; only the why is missing
        return Counter()


def _delivered(output: Output) -> dict[str, tuple[int, Counter[str], Any]]:
    """The output's senders' counts, if it keeps them (on the stage's thread)."""
    delivered = getattr(output, "delivered", None)
    if not callable(delivered):
        return {}
    try:
        return dict(delivered())
    except Exception:  # noqa: BLE001 - only the health metrics miss them
        return {}


def _items(kinds: Counter[str]) -> str:
    named = [f"{kinds[kind]} {kind}" for kind in KINDS if kinds[kind]]
    if len(named) <= 1:
        return named[0] if named else "0 items"
    return ", ".join(named[:-1]) + " and " + named[-1]
