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
stays in the main process, unchanged: the merge by timestamp, the :class:`.Rebuilder`'s
join (resources learnt, records waiting for theirs, every bound and eviction, the services
and invalid counts, the writers' process views), and the grouping of items by resource and
scope in a line. The rebuilder is handed the records in the very order the in-process path
hands them, and treats a worker's encoded record as it treats a checked one; so every count
and every record's resource and scope are the same as with one process, by construction,
and only the batching of lines may differ (``tests/test_workers.py`` proves both, over
random and hostile pages). Tree view and ``--exporter`` need SDK objects, built from whole checked
records: they run in-process (``--workers`` does not apply to them).

Safety: workers are started with ``spawn`` (a fresh interpreter: no tracefs descriptor, no
output file, nothing of the main process but two pipes), ignore Ctrl-C, SIGTERM and SIGHUP
(the main process decides when they stop: it closes their pipe, and a worker whose pipe is
closed exits), decode with the same decoder and checker, and hold one chunk at a time. The
main process keeps at most :attr:`WorkerPool.window` chunks in flight per worker, so memory
is bounded whatever the input. A worker that dies or raises is a :class:`WorkerError` in
the main process (its pipe ends: never a hang), which the commands report, with a non-zero
exit status.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats
from opentelemetry_exporter_userevents.reader.worker_loop import Decoded, serve

MAX_DEFAULT_WORKERS = 4
"""The default is the CPUs this process may run on, at most this many (past it, the main
process, which merges, rebuilds and writes, is the bottleneck)."""
CHUNK_PAGES = 32
"""Pages a worker decodes at a time (128 KiB of 4 KiB pages: a few hundred records)."""
WINDOW = 2
"""Chunks in flight per worker: one decoding, one waiting, so a worker is never idle while
the main process has work for it; memory is bounded by workers x window x chunk."""


class WorkerError(RuntimeError):
    """A worker died or failed; the message says which and how."""


def default_workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_WORKERS))


# --- in the main process ---------------------------------------------------------------


class WorkerPool:
    """``count`` worker processes, each fed chunks in turn; results come back by ticket.

    Bounded: :meth:`submit` waits (taking results meanwhile) while the next worker has
    :data:`WINDOW` chunks in flight; results not yet taken are kept, so a caller takes
    them in time (the commands take each read's before the next)."""

    def __init__(self, count: int, prefixes: Sequence[str], layout: PageLayout) -> None:
        context = multiprocessing.get_context("spawn")
        self.stats = DecoderStats()
        """What the workers decoded, added up (for the summary)."""
        self._tasks: list[Connection] = []
        self._results: list[Connection] = []
        self._processes: list[Any] = []
        self._in_flight: list[int] = []
        self._done: dict[int, list[Decoded]] = {}
        self._owner: dict[int, int] = {}
        self._next_ticket = 0
        self._next_worker = 0
        self._formats_sent: set[str] = set()
        try:
            for number in range(count):
                task_read, task_write = context.Pipe(duplex=False)
                result_read, result_write = context.Pipe(duplex=False)
                process = context.Process(
                    target=serve,
                    args=(task_read, result_write, tuple(prefixes), layout),
                    name=f"otel-userevents worker {number}",
                    daemon=True,
                )
                process.start()
                task_read.close()  # the worker's ends: its death is EOF here
                result_write.close()
                self._tasks.append(task_write)
                self._results.append(result_read)
                self._processes.append(process)
                self._in_flight.append(0)
        except BaseException:
            self.close()
            raise

    @property
    def count(self) -> int:
        return len(self._processes)

    def add_formats(self, texts: Iterable[str]) -> None:
        """Formats to decode with, from now on (each sent once, to every worker, in order
        with the chunks: a chunk submitted before decodes without them)."""
        new = [text for text in texts if text not in self._formats_sent]
        if new:
            self._formats_sent.update(new)
            for number in range(self.count):
                self._send(number, ("formats", new))

    def submit(self, pages: Sequence[bytes | memoryview]) -> int:
        """Hand a chunk of pages to the next worker; return its ticket."""
        number = self._next_worker
        self._next_worker = (number + 1) % self.count
        while self._in_flight[number] >= WINDOW:
            self._receive()
        ticket = self._next_ticket
        self._next_ticket += 1
        self._owner[ticket] = number
        self._in_flight[number] += 1
        self._send(number, ("pages", ticket, [bytes(page) for page in pages]))
        return ticket

    def result(self, ticket: int) -> list[Decoded]:
        """The chunk's records, in page order (waits for them)."""
        while ticket not in self._done:
            self._receive()
        return self._done.pop(ticket)

    def _send(self, number: int, message: Any) -> None:
        try:
            self._tasks[number].send(message)
        except OSError:
            raise WorkerError(self._why(number)) from None

    def _receive(self) -> None:
        ready = wait(self._results + [p.sentinel for p in self._processes])
        for number, connection in enumerate(self._results):
            if connection not in ready:
                continue
            try:
                message = connection.recv()
            except (EOFError, OSError):
                raise WorkerError(self._why(number)) from None
            if message[0] == "error":
                raise WorkerError(f"worker {number} failed:\n{message[1]}")
            ticket, records, stats = message
            self._done[ticket] = records
            self._in_flight[self._owner.pop(ticket)] -= 1
            total = self.stats
            total.records += stats[0]
            total.pages += stats[1]
            total.corrupt_pages += stats[2]
            total.undecodable += stats[3]
            total.pages_with_missed_events += stats[4]
            return
        for number, process in enumerate(self._processes):
            if process.sentinel in ready and not self._results[number].poll():
                raise WorkerError(self._why(number))

    def _why(self, number: int) -> str:
        process = self._processes[number]
        process.join(1.0)
        code = process.exitcode
        if code is None:
            how = "stopped answering"
        elif code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with status {code}"
        return f"decoding worker {number} (pid {process.pid}) {how}; its records are lost"

    def close(self) -> None:
        """Stop the workers (their pipes closed: they exit); kill any that does not.
        Idempotent."""
        for connection in self._tasks:
            try:
                connection.send(None)
            except OSError:
                pass
            connection.close()
        for process in self._processes:
            process.join(5.0)
            if process.is_alive():
                process.kill()
                process.join()
        for connection in self._results:
            connection.close()
        self._tasks, self._results, self._processes = [], [], []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def chunks(pages: Sequence[Any], size: int = CHUNK_PAGES) -> Iterator[Sequence[Any]]:
    for first in range(0, len(pages), size):
        yield pages[first : first + size]


def cpu_records(
    pool: WorkerPool, pages: Iterator[Any], ahead: int, size: int = CHUNK_PAGES
) -> Iterator[Decoded]:
    """One CPU's records (in page order), its chunks decoded ``ahead`` at a time."""
    tickets: deque[int] = deque()
    chunk: list[Any] = []
    for page in pages:
        chunk.append(page)
        if len(chunk) >= size:
            tickets.append(pool.submit(chunk))
            chunk = []
            if len(tickets) > ahead:
                yield from pool.result(tickets.popleft())
    if chunk:
        tickets.append(pool.submit(chunk))
    while tickets:
        yield from pool.result(tickets.popleft())
