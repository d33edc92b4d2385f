# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Decoding, checking and OTLP/JSON encoding spread over worker processes (``--workers N``).

What is split, and why the output stays exact. A span or log costs the reader three things
that depend on that record alone: decoding it from its page (:class:`.RecordDecoder`),
checking it (:class:`.RecordChecker`, the validation boundary) and encoding it as an OTLP
JSON item; together about 85% of the one-core path. Workers do exactly these, chunk by
chunk of pages (:mod:`.worker_loop`), and send back what the join needs of each record
(:mod:`.joinable`): an encoded span or log, the reason one is invalid, or a resource or
metric record whole. Everything whose result depends on the order of records across CPUs
stays in the main process, unchanged: the merge by timestamp, the :class:`.JoinStage`'s
join (resources learnt, records waiting for theirs, every bound and eviction, the services
and invalid counts, the writers' process views), and the grouping of items by resource and
scope in a line (:mod:`.grouping`). The join_stage is handed the records in the very order
the in-process path hands them, and treats a worker's encoded record as it treats a checked
one; so every count and every record's resource and scope are the same as with one
process, by construction, and only the batching of lines may differ
(``tests/reader/test_workers.py`` proves both, over random and hostile pages). Tree view and
``--exporter`` need SDK objects, built from whole checked records: they run in-process
(``--workers`` does not apply to them). ``record --kernel`` has its spans sent back checked,
not encoded: the kernel view adds to them in the main process, where the kernel's events are.

Nothing taken is lost. Workers are started with ``spawn`` (a fresh interpreter: no tracefs
descriptor, no output file, nothing of the main process but two pipes) and never stop on
Ctrl-C, SIGTERM or SIGHUP, even while they start (:mod:`.worker_bootstrap`): the main
process decides when they stop (it closes their pipe). It keeps each chunk it handed out
until its records come back; a worker that dies, or fails, is taken out of the rotation,
and the chunks it held are decoded in the main process (:func:`.worker_loop.decode_chunk`:
the same records), or, should that fail too, counted lost; so is one that does not start
within :data:`START_WAIT`, or sends nothing for :data:`RESULT_WAIT`, while the main process
waits on it (it is killed first). Chunks go out
through a thread per worker, so the main process never blocks on a worker's full pipe. A
worker's death is reported once the rest is written (:meth:`WorkerPool.error`; a non-zero
exit status): never a hang, never a silent loss. Memory is bounded whatever the input: at
most :data:`WINDOW` chunks in flight per worker.
"""

from __future__ import annotations

import multiprocessing
import queue
import signal
import threading
import time
from collections.abc import Sequence
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from typing import Any

from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats, RecordDecoder
from opentelemetry_exporter_userevents.reader.decode.eventheader_check import EventHeaderChecker
from opentelemetry_exporter_userevents.reader.decode.validation import RecordChecker
from opentelemetry_exporter_userevents.reader.pipeline.resource_tracker import (
    stop_tracker,
    tracker_pid,
)
from opentelemetry_exporter_userevents.reader.pipeline.worker_bootstrap import (
    main,
    stop_signals_blocked,
)
from opentelemetry_exporter_userevents.reader.pipeline.worker_loop import (
    ChunkItem,
    Decoded,
    add_formats,
    decode_chunk,
)

CHUNK_PAGES = 32
"""Pages a worker decodes at a time (128 KiB of 4 KiB pages: a few hundred records)."""
WINDOW = 2
"""Chunks in flight per worker: one decoding, one waiting, so a worker is never idle while
the main process has work for it. The main process keeps each until its records come back
(to decode it itself should the worker die): memory is bounded by workers x window x
chunk."""


START_WAIT = 600.0
"""Seconds the main process waits on a worker that has not started (an interpreter, and the
reader's imports: seconds on a loaded host, more than a minute for four workers under
emulation); then it is taken as stuck: killed, its chunks decoded in the main process."""
RESULT_WAIT = 60.0
"""Seconds the main process waits on a started worker that has chunks and sends nothing
(a chunk takes a fraction of a second); then it is taken as stuck, as above."""
CLOSE_WAIT = 5.0
"""Seconds :meth:`WorkerPool.close` waits, for all the workers together, when the caller
gives no deadline (a worker exits as soon as its pipe closes)."""
WAIT_SLICE = 1.0
"""The main process waits in slices of this many seconds and counts only slices that ended
with nothing heard: a reader that was itself stopped (Ctrl-Z) never takes a worker as
stuck for the time it was stopped."""


class WorkerError(RuntimeError):
    """Workers died or failed; the message says which, how, and what became of the pages
    they held."""


class WorkerPool:
    """``count`` worker processes, each fed chunks in turn; results come back by ticket.

    Bounded: :meth:`submit` waits (taking results meanwhile) while the live workers have
    :data:`WINDOW` chunks in flight each; results not yet taken are kept, so a caller takes
    them in time (the commands take each read's before the next)."""

    def __init__(
        self,
        count: int,
        prefixes: Sequence[str],
        layout: PageLayout,
        providers: Sequence[str] = (),
        encode_spans: bool = True,
    ) -> None:
        """``providers``: the EventHeader providers the decoders read, as the main
        process's (:class:`.RecordDecoder`); ``encode_spans`` off: spans come back checked,
        not encoded (:func:`.worker_loop.check_and_encode`, for ``record --kernel``)."""
        context = multiprocessing.get_context("spawn")
        self.stats = DecoderStats()
        """What the workers (and the main process, for a dead worker) decoded, added up."""
        self.failures: list[str] = []
        """One line per worker that died or failed (at most ``count``)."""
        self.recovered_pages = 0
        """Pages that dead workers held, decoded in the main process instead."""
        self.lost_pages = 0
        """Pages that dead workers held and the main process could not decode either."""
        self.stopped_late_pages = 0
        """Pages the workers still held at the stop's deadline, decoded here instead."""
        self.decoded_here = 0
        """Pages the main process decoded itself while the worker next in turn was still
        starting with its chunks waiting: a spawned interpreter takes 0.15 s to a second
        (a loaded host) to import the reader, and the main process would only wait."""
        self._prefixes = tuple(prefixes)
        self._providers = tuple(providers)
        self._layout = layout
        self._encode_spans = encode_spans
        self._tasks: list[Connection] = []
        self._feeds: list[queue.SimpleQueue[Any]] = []
        """What each worker's feeder thread sends it: at most :data:`WINDOW` chunks, and
        each format once."""
        self._feeders: list[threading.Thread] = []
        self._results: list[Connection] = []
        self._processes: list[Any] = []
        self._alive: list[bool] = []
        self._started: list[bool] = []
        """Whether each worker said it is ready (its imports done)."""
        self._waited: list[float] = []
        """Seconds the main process waited on each worker, busy, without hearing from it."""
        self._in_flight: list[int] = []
        self._done: dict[int, list[Decoded]] = {}
        self._chunks: dict[int, tuple[int, list[ChunkItem], int]] = {}
        """Each ticket in flight: its worker, its pages, and how many formats it knew."""
        self._next_ticket = 0
        self._next_worker = 0
        self._formats: list[str] = []
        """The format texts sent to the workers, in order."""
        self._known: set[str] = set()
        self._seen = 0
        """How many of the source's formats were looked at (:meth:`_learn`)."""
        self._started_tracker = tracker_pid() is None
        self._local: tuple[int, RecordDecoder] | None = None
        self._checker = RecordChecker()
        self._eventheader_checker = EventHeaderChecker()
        try:
            for number in range(count):
                task_read, task_write = context.Pipe(duplex=False)
                result_read, result_write = context.Pipe(duplex=False)
                process = context.Process(
                    target=main,
                    args=(
                        task_read,
                        result_write,
                        self._prefixes,
                        layout,
                        self._providers,
                        encode_spans,
                    ),
                    name=f"otel-userevents worker {number}",
                    daemon=True,
                )
                # Started first, outside the block: starting it unblocks SIGINT and SIGTERM.
                resource_tracker.ensure_running()
                with stop_signals_blocked():
                    process.start()
                task_read.close()  # the worker's ends: its death is EOF here
                result_write.close()
                self._tasks.append(task_write)
                feed: queue.SimpleQueue[Any] = queue.SimpleQueue()
                feeder = threading.Thread(
                    target=_feed, args=(feed, task_write), name=f"feeder {number}", daemon=True
                )
                feeder.start()
                self._feeds.append(feed)
                self._feeders.append(feeder)
                self._results.append(result_read)
                self._processes.append(process)
                self._alive.append(True)
                self._started.append(False)
                self._waited.append(0.0)
                self._in_flight.append(0)
        except BaseException:
            self.close()
            raise

    @property
    def count(self) -> int:
        return len(self._processes)

    def _learn(self, formats: Sequence[str]) -> None:
        """Send every live worker the formats of ``formats`` it has not had, ahead of the
        chunk that comes with them (a worker's pipe keeps the order)."""
        if len(formats) <= self._seen:
            return
        new = [text for text in formats[self._seen :] if text not in self._known]
        self._seen = len(formats)
        if new:
            self._formats += new
            self._known.update(new)
            for number in range(self.count):
                if self._alive[number]:
                    self._send(number, ("formats", new))

    def submit(
        self,
        pages: Sequence[bytes | memoryview | tuple[int, bytes]],
        formats: Sequence[str],
        deadline: float | None = None,
    ) -> int:
        """Hand a chunk of pages to the next live worker (none left, or it is still
        starting with :data:`WINDOW` chunks waiting and no worker has anything to take:
        decode it here); return its ticket (waiting for room at most until ``deadline``, as
        :meth:`result` does). ``formats``: every format text the source
        knew once these pages were read, in the order it learnt them (it only grows): the
        ones not sent yet go first, so no chunk reaches a worker before its formats."""
        self._learn(formats)
        ticket = self._next_ticket
        self._next_ticket += 1
        chunk = [page if isinstance(page, tuple) else bytes(page) for page in pages]
        while True:
            number = self._next_live()
            if number is None:
                self._decode_here(ticket, chunk, len(self._formats))
                return ticket
            if self._in_flight[number] < WINDOW:
                break
            if not self._started[number] and not self._heard():
                try:
                    self._done[ticket] = self._decode(chunk, len(self._formats))
                except Exception:  # noqa: BLE001 - left to the worker, whose failure is said
                    pass
                else:
                    self.decoded_here += len(chunk)
                    return ticket
            self._receive(deadline)
        self._chunks[ticket] = (number, chunk, len(self._formats))
        if not self._in_flight[number]:
            self._waited[number] = 0.0  # idle until now: only busy time counts
        self._in_flight[number] += 1
        self._send(number, ("pages", ticket, chunk))
        return ticket

    def result(self, ticket: int, deadline: float | None = None) -> list[Decoded]:
        """The chunk's records, in page order (waits for them; past ``deadline``, a
        ``time.monotonic()`` reading, the workers still busy are killed and the chunks
        they held decoded here: the stop's deadline covers the workers)."""
        while ticket not in self._done:
            self._receive(deadline)
        return self._done.pop(ticket)

    def error(self) -> WorkerError | None:
        """The workers that died or failed, and what became of their pages; None if none
        did."""
        return WorkerError("; ".join(self.failures)) if self.failures else None

    def _next_live(self) -> int | None:
        for _ in range(self.count):
            number = self._next_worker
            self._next_worker = (number + 1) % self.count
            if self._alive[number]:
                return number
        return None

    def _send(self, number: int, message: Any) -> None:
        self._feeds[number].put(message)  # a worker that is gone: seen in _receive

    def _receive(self, deadline: float | None = None) -> None:
        """Take one chunk's records, or take out a worker that died (its chunks decoded
        here) or that is still busy at ``deadline`` (its chunks counted lost)."""
        busy = [n for n in range(self.count) if self._alive[n] and self._in_flight[n]]
        if not busy:
            raise RuntimeError("no chunk in flight")  # a ticket never submitted, or taken
        objects = [self._results[n] for n in busy] + [self._processes[n].sentinel for n in busy]
        while not (ready := wait(objects, _slice(deadline))):
            if deadline is not None and time.monotonic() >= deadline:
                for number in busy:
                    self._stop_late(number)
                return
            stuck = False
            for number in busy:
                self._waited[number] += WAIT_SLICE
                if not self._started[number] and self._waited[number] >= START_WAIT:
                    self._fail(number, f"did not start in {START_WAIT:g} s (killed)")
                    stuck = True
                elif self._started[number] and self._waited[number] >= RESULT_WAIT:
                    self._fail(number, f"sent nothing for {RESULT_WAIT:g} s (killed)")
                    stuck = True
            if stuck:
                return
        for number in busy:  # what a worker sent before it died is taken first
            if self._results[number] not in ready:
                continue
            try:
                message = self._results[number].recv()
            except (EOFError, OSError):
                self._fail(number)
                return
            self._waited[number] = 0.0
            if message[0] == "ready":
                self._started[number] = True
                return
            if message[0] == "error":
                self._fail(number, f"failed:\n{message[1]}")
                return
            ticket, records, stats = message
            del self._chunks[ticket]
            self._in_flight[number] -= 1
            self._done[ticket] = records
            self.stats.add(stats)
            return
        for number in busy:
            if self._processes[number].sentinel in ready and not self._results[number].poll():
                self._fail(number)
                return

    def _stop_late(self, number: int) -> None:
        """At the stop's deadline, a worker still starting or busy: killed, and the chunks
        it held decoded here (at most :data:`WINDOW` of :data:`CHUNK_PAGES` pages: a
        bounded time past the deadline, and no page lost). Not a failure: it was only
        slow (a worker imports the reader for over a minute under emulation)."""
        self._alive[number] = False
        process = self._processes[number]
        if process.is_alive():
            process.kill()
        for ticket in [t for t, held in self._chunks.items() if held[0] == number]:
            _, chunk, known = self._chunks.pop(ticket)
            self._in_flight[number] -= 1
            try:
                self._done[ticket] = self._decode(chunk, known)
            except Exception:  # noqa: BLE001 - as for a dead worker's: counted, said
                self._done[ticket] = []
                self.lost_pages += len(chunk)
                held = f"{len(chunk)} pages it held at the stop are lost"
                self.failures.append(f"decoding worker {number} (pid {process.pid}): {held}")
                continue
            self.stopped_late_pages += len(chunk)

    def _fail(self, number: int, how: str | None = None) -> None:
        """Take worker ``number`` out: its chunks decoded here, its death noted."""
        if not self._alive[number]:
            return
        self._alive[number] = False
        process = self._processes[number]
        how = how or self._how(number)
        if process.is_alive():
            process.kill()
        recovered, lost = self.recovered_pages, self.lost_pages
        for ticket in [t for t, held in self._chunks.items() if held[0] == number]:
            _, chunk, known = self._chunks.pop(ticket)
            self._in_flight[number] -= 1
            self._decode_here(ticket, chunk, known)
        what = f"the {self.recovered_pages - recovered} pages it held were decoded in-process"
        if self.lost_pages > lost:
            what += f", {self.lost_pages - lost} could not be and are lost"
        self.failures.append(f"decoding worker {number} (pid {process.pid}) {how}; {what}")

    def _heard(self) -> bool:
        """Whether a live worker has sent something not taken yet (never waits)."""
        return any(
            self._alive[n] and self._in_flight[n] and self._results[n].poll()
            for n in range(self.count)
        )

    def _decode_here(self, ticket: int, chunk: list[ChunkItem], known: int) -> None:
        """A dead worker's chunk decoded in this process, with the formats the worker
        would have had."""
        try:
            self._done[ticket] = self._decode(chunk, known)
        except Exception:  # noqa: BLE001 - what killed a worker may fail here too: counted
            self._done[ticket] = []
            self.lost_pages += len(chunk)
            return
        self.recovered_pages += len(chunk)

    def _decode(self, chunk: list[ChunkItem], known: int) -> list[Decoded]:
        """A chunk's records decoded here, with the first ``known`` formats."""
        if self._local is None or self._local[0] != known:
            decoder = RecordDecoder(self._prefixes, self._layout, self._providers)
            add_formats(decoder, self._formats[:known])
            self._local = (known, decoder)
        records, stats = decode_chunk(
            self._local[1], self._checker, chunk, self._eventheader_checker, self._encode_spans
        )
        self.stats.add(stats)
        return records

    def _how(self, number: int) -> str:
        process = self._processes[number]
        process.join(1.0)
        code = process.exitcode
        if code is None:
            return "stopped answering"
        if code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def close(self, deadline: float | None = None) -> None:
        """Stop the workers (their pipes closed: they exit); kill any still running at
        ``deadline`` (a ``time.monotonic()`` reading; by default :data:`CLOSE_WAIT` from
        now, for all of them together); stop the resource tracker the pool started (it
        holds the command's standard output and error open). Idempotent."""
        if deadline is None:
            deadline = time.monotonic() + CLOSE_WAIT
        for feed in self._feeds:
            feed.put(None)  # after what it holds; then the worker's pipe is closed
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
        for feeder in self._feeders:
            feeder.join()  # its worker is gone: it is not blocked on its pipe
        for connection in self._tasks + self._results:
            connection.close()
        self._tasks, self._results, self._processes = [], [], []
        self._feeds, self._feeders = [], []
        if self._started_tracker:
            self._started_tracker = False
            stop_tracker()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _slice(deadline: float | None) -> float:
    """How long one wait for a worker lasts: :data:`WAIT_SLICE`, less near ``deadline``."""
    if deadline is None:
        return WAIT_SLICE
    return max(0.0, min(WAIT_SLICE, deadline - time.monotonic()))


def _feed(messages: queue.SimpleQueue[Any], connection: Connection) -> None:
    """A worker's feeder thread: its messages down its pipe, in order, then None (stop)."""
    while True:
        message = messages.get()
        try:
            connection.send(message)
        except OSError:
            return  # the worker is gone: the main process sees it die
        if message is None:
            return
