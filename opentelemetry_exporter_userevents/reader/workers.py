# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Decoding, checking and OTLP/JSON encoding spread over worker processes (``--workers N``).

What is split, and why the output stays exact. A span or log costs the reader three things
that depend on that record alone: decoding it from its page (:class:`.RecordDecoder`),
checking it (:class:`.RecordChecker`, the validation boundary) and encoding it as an OTLP
JSON item; together about 85% of the one-core path. Workers do exactly these, chunk by
chunk of pages, and send back a light tuple per record: its timestamp, kind, tracepoint,
writer pid, resource id, ``truncated`` bits, scope text and encoded item (or the reason it
is invalid). Everything whose result depends on the order of records across CPUs stays in
the main process, unchanged: the merge by timestamp, the :class:`.Rebuilder` itself
(resources learnt, records waiting for theirs, every bound and eviction, the services and
invalid counts, the writers' process views), and the grouping of items by resource and
scope in a line. The rebuilder is handed :class:`~.decoder.TraceRecord` objects in the very
order the in-process path hands them, and its checker answers for each span or log with
the worker's verdict (:class:`PrecheckedChecker`); resource and metric records pass
through whole and are checked in the main process, as before. So every count and every
record's resource and scope are the same as with one process, by construction, and only
the batching of lines may differ (``tests/reader/test_workers.py`` proves both, over random and
hostile pages). Tree view and ``--exporter`` need SDK objects, built from whole checked
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
import queue
import signal
import threading
import traceback
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, TextIO

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedLog,
    CheckedMetric,
    CheckedResource,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import (
    DecoderStats,
    RecordDecoder,
    TraceRecord,
)
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord, RecordChecker
from opentelemetry_exporter_userevents.reader.join.rebuild import JoinedRecord, Rebuilder, Telemetry
from opentelemetry_exporter_userevents.reader.outputs import otlp_json_direct
from opentelemetry_exporter_userevents.reader.outputs.output import OtlpJsonOutput
from opentelemetry_exporter_userevents.record.tracepoints import LOG_KIND, SPAN_KIND

MAX_DEFAULT_WORKERS = 4
"""The default is the CPUs this process may run on, at most this many (past it, the main
process, which merges, rebuilds and writes, is the bottleneck)."""
CHUNK_PAGES = 32
"""Pages a worker decodes at a time (128 KiB of 4 KiB pages: a few hundred records)."""
WINDOW = 2
"""Chunks in flight per worker: one decoding, one waiting, so a worker is never idle while
the main process has work for it; memory is bounded by workers x window x chunk."""

Light = tuple[Any, ...]
"""A record as a worker sends it back: a :class:`TraceRecord` (resources, metrics), or
``(timestamp, kind, tracepoint, pid, reason)`` for an invalid span or log, or
``(timestamp, kind, tracepoint, pid, resource_id, truncated, scope_text, item)`` for a
checked one (``item``: its OTLP/JSON encoding, None where OTLP cannot carry it)."""

_STUB: dict[str, Any] = {}
"""The attributes of every record :class:`PrecheckedChecker` stands in for a worker's
(told apart by identity: a record read in-process has attributes of its own)."""
_PRE = "\0prechecked"
"""The key of a worker's verdict in a rebuilt record's values (no field has this name)."""


class WorkerError(RuntimeError):
    """A worker died or failed; the message says which and how."""


def default_workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_WORKERS))


# --- in the worker -------------------------------------------------------------------


def check_and_encode(records: Iterable[TraceRecord], checker: RecordChecker) -> list[Light]:
    """What a worker sends back for decoded records (see :data:`Light`)."""
    out: list[Light] = []
    scopes: dict[str, str] = {}  # one object per scope text: pickled once per chunk
    span_item, log_item = otlp_json_direct._span, otlp_json_direct._log
    for record in records:
        kind = record.kind
        if kind != SPAN_KIND and kind != LOG_KIND:
            out.append(record)
            continue
        values = record.values
        item: str | None
        try:
            if kind == SPAN_KIND:
                checked: CheckedSpan | CheckedLog = checker.span(values)
                encode: Any = span_item
            else:
                checked = checker.log(values)
                encode = log_item
        except InvalidRecord as invalid:
            out.append((record.timestamp, kind, record.tracepoint, record.pid, invalid.reason))
            continue
        try:
            item = encode(checked)
        except otlp_json_direct.Unrepresentable:
            item = None
        scope = scopes.setdefault(checked.scope_text, checked.scope_text)
        out.append(
            (record.timestamp, kind, record.tracepoint, record.pid,
             values["resource_id"], values["truncated"], scope, item)
        )  # fmt: skip
    return out


def _stats_tuple(stats: DecoderStats) -> tuple[int, int, int, int, int]:
    return (stats.records, stats.pages, stats.corrupt_pages, stats.undecodable,
            stats.pages_with_missed_events)  # fmt: skip


def _worker_main(tasks: Connection, results: Connection, prefixes: Sequence[str],
                 layout: PageLayout) -> None:  # fmt: skip
    """A worker: formats and chunks of pages in, light records out, until its pipe
    closes. Results go out through a thread, so the worker keeps taking chunks while the
    main process is busy (neither side ever blocks on the other's full pipe)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    decoder = RecordDecoder(prefixes, layout)
    checker = RecordChecker()
    outgoing: queue.Queue[Any] = queue.Queue()

    def send() -> None:
        while (message := outgoing.get()) is not None:
            try:
                results.send(message)
            except OSError:
                os._exit(1)  # the main process is gone

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        while True:
            try:
                task = tasks.recv()
            except EOFError:
                break
            if task is None:
                break
            if task[0] == "formats":
                for text in task[1]:
                    try:
                        decoder.add(parse_format(text))
                    except ValueError:
                        continue  # the main process refused it too
                continue
            _, ticket, pages = task
            decoder.stats = DecoderStats()
            records: list[TraceRecord] = []
            for page in pages:
                decoder.decode_page(page, records)
            outgoing.put((ticket, check_and_encode(records, checker), _stats_tuple(decoder.stats)))
    except BaseException:  # noqa: BLE001 - a bug: the main process reports it
        outgoing.put(("error", traceback.format_exc(limit=8)))
    outgoing.put(None)
    sender.join()


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
        self._done: dict[int, list[Light]] = {}
        self._owner: dict[int, int] = {}
        self._next_ticket = 0
        self._next_worker = 0
        self._formats_sent: set[str] = set()
        try:
            for number in range(count):
                task_read, task_write = context.Pipe(duplex=False)
                result_read, result_write = context.Pipe(duplex=False)
                process = context.Process(
                    target=_worker_main,
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

    def result(self, ticket: int) -> list[Light]:
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
) -> Iterator[Light]:
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


# --- back to what the rebuilder takes ----------------------------------------------------


class PrecheckedChecker:
    """The rebuilder's checker with workers: a span or log carries the worker's verdict
    (its scope text and encoded item, or the reason it is invalid); anything else, and
    records read in-process, are checked here as before."""

    def __init__(self, checker: RecordChecker) -> None:
        self.checker = checker

    def span(self, values: dict[str, Any]) -> CheckedSpan:
        pre = values.get(_PRE)
        if pre is None:
            return self.checker.span(values)
        if type(pre) is str:
            raise InvalidRecord(pre)
        scope_text, item = pre
        return CheckedSpan(0, 0, None, False, 0, (), item, 0, 0, "", 0, 0, _STUB, 0, [], 0, [], 0,
                           scope_text, self.checker.scope(scope_text, "span"))  # fmt: skip

    def log(self, values: dict[str, Any]) -> CheckedLog:
        pre = values.get(_PRE)
        if pre is None:
            return self.checker.log(values)
        if type(pre) is str:
            raise InvalidRecord(pre)
        scope_text, item = pre
        return CheckedLog(0, 0, 0, 0, 0, 0, None, None, item, _STUB, 0, scope_text,
                          self.checker.scope(scope_text, "log"))  # fmt: skip

    def resource(self, values: dict[str, Any]) -> CheckedResource:
        return self.checker.resource(values)

    def metric(self, values: dict[str, Any], kind: str | None) -> CheckedMetric:
        return self.checker.metric(values, kind)

    def scope(self, text: str, kind: str) -> Any:
        return self.checker.scope(text, kind)


def prechecked(rebuilder: Rebuilder) -> Rebuilder:
    """``rebuilder``, taking records that workers checked (and, still, any other)."""
    if not isinstance(rebuilder.checker, PrecheckedChecker):
        rebuilder.checker = PrecheckedChecker(rebuilder.checker)  # type: ignore[assignment]
    return rebuilder


def trace_records(lights: Iterable[Light]) -> list[TraceRecord]:
    """Workers' records as the rebuilder takes them (its checker :func:`prechecked`)."""
    out: list[TraceRecord] = []
    append = out.append
    for light in lights:
        if type(light) is TraceRecord:
            append(light)
        elif len(light) == 5:
            append(TraceRecord(light[0], light[1], light[2], light[3], {_PRE: light[4]}))
        else:
            ts, kind, tracepoint, pid, rid, truncated, scope_text, item = light
            values = {"resource_id": rid, "truncated": truncated, _PRE: (scope_text, item)}
            append(TraceRecord(ts, kind, tracepoint, pid, values))
    return out


class PrecheckedOtlpJsonOutput:
    """OTLP/JSON lines from records checked by workers: grouped by resource and scope as
    :mod:`.otlp_json_direct` groups them, each item the worker's encoding; metric points
    (and records read in-process) through :class:`.OtlpJsonOutput`."""

    sdk_objects = False

    def __init__(self, out: TextIO) -> None:
        self.plain = OtlpJsonOutput(out)
        self.out = out
        self.failed = 0
        """As :attr:`.OtlpJsonOutput.failed` (its own and the plain output's)."""
        self._failed = 0
        self._encoded = otlp_json_direct.EncodedCache[str]()

    def write(self, items: Sequence[Telemetry]) -> None:
        spans: list[JoinedRecord] = []
        logs: list[JoinedRecord] = []
        rest: list[Telemetry] = []
        for item in items:
            if type(item) is JoinedRecord:
                checked = item.checked
                if checked.attributes is _STUB:
                    (spans if type(checked) is CheckedSpan else logs).append(item)
                    continue
            rest.append(item)
        for joined, keys in ((spans, _SPAN_KEYS), (logs, _LOG_KEYS)):
            if joined:
                line, failed = otlp_json_direct._line(joined, _item, *keys, self._encoded)
                self._failed += failed
                if line is not None:
                    self.out.write(line + "\n")
        if rest:
            self.plain.write(rest)
        else:
            self.out.flush()
        self.failed = self._failed + self.plain.failed

    def close(self) -> None:
        self.plain.close()


_SPAN_KEYS = ("resourceSpans", "scopeSpans", "spans")
_LOG_KEYS = ("resourceLogs", "scopeLogs", "logRecords")


def _item(checked: CheckedSpan | CheckedLog) -> str:
    item: str | None = checked.name if isinstance(checked, CheckedSpan) else checked.body
    if item is None:
        raise otlp_json_direct.Unrepresentable("left out by the worker")
    return item
