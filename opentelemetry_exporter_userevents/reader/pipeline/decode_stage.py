# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The decode stage: pages in, records out by timestamp, decoded, and with workers checked
and encoded too (:mod:`.worker_loop`).

It runs in this process, or in worker processes (``--workers`` above 1: :class:`.WorkerPool`)
once a read is busy (:data:`BUSY_PAGES`) or a capture is large (:data:`WORKERS_FROM`);
either way the join gets the same records in the same order (the workers' are checked and
encoded already: the join takes both alike). Live, one read is in flight: the workers
decode a read while the main process joins and delivers the one before. The formats come
with the pages (:class:`.PageBatch`), so a worker never has a page before its format.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator, Sequence
from operator import attrgetter, itemgetter

from opentelemetry_exporter_userevents.reader.capture.decode import DecodedCapture, by_rounds
from opentelemetry_exporter_userevents.reader.decode.decoder import (
    DecoderStats,
    RecordDecoder,
    TraceRecord,
)
from opentelemetry_exporter_userevents.reader.native.native_core import OTLP_JSON, NativeCore
from opentelemetry_exporter_userevents.reader.pipeline.native_chunk import NativeChunks
from opentelemetry_exporter_userevents.reader.pipeline.page_batch import PageBatch
from opentelemetry_exporter_userevents.reader.pipeline.page_chunks import chunks, cpu_records
from opentelemetry_exporter_userevents.reader.pipeline.worker_loop import ChunkItem, Decoded
from opentelemetry_exporter_userevents.reader.pipeline.worker_pool import (
    WorkerError,
    WorkerPool,
)

BUSY_PAGES = 64
"""A read of at least this many pages starts the workers (``--workers`` above 1): a reader
that is never busy never starts them."""
WORKERS_FROM = 4 << 20
"""Captures smaller than this decode in-process whatever ``--workers`` says: starting
interpreters would cost more than it saves."""
_TIMESTAMP = itemgetter(0)  # TraceRecord.timestamp, and a worker's record's
_TIMESTAMP_FIELD = attrgetter("timestamp")  # and a CheckedSpan's (not its first field)


class DecodeStage:
    """Decodes a source's pages with ``decoder`` (the source's: its formats, its counts in
    ``decoder.stats``, the workers' added in), in this process or with ``workers``."""

    def __init__(
        self,
        decoder: RecordDecoder,
        workers: int = 1,
        encode_spans: bool = True,
        native: NativeCore | None = None,
    ) -> None:
        """``encode_spans`` off (``--kernel``): the workers send spans back checked, not
        encoded, for the kernel view to add to them. ``native``: the native core, for an
        output that takes encoded items (OTLP/JSON lines, the direct OTLP senders'
        protobuf): in this process, it checks and encodes spans and logs
        (:mod:`.native_chunk`)."""
        self.decoder = decoder
        self.workers = workers
        self.encode_spans = encode_spans
        self.pool: WorkerPool | None = None
        self._in_flight: list[int] = []
        self.native = None
        # OTLP/JSON, as a worker encodes; protobuf, for the join's door; the core takes its
        # plans from a RecordDecoder (a stand-in decoder, a test's, decodes in Python)
        if native is not None and isinstance(decoder, RecordDecoder):
            self.native = NativeChunks(
                native, decoder, encode_deferred=native.encoding == OTLP_JSON
            )

    # --- live: a read at a time -------------------------------------------------------

    def take(
        self, batch: PageBatch, last: bool = False, deadline: float | None = None
    ) -> Sequence[Decoded]:
        """A read's records, by timestamp: this one's in-process; with workers, the read
        before's (this one is left in flight: :meth:`drain`), waiting for them at most
        until ``deadline`` (the stop's). A busy read starts the workers (never the
        ``last``)."""
        if self.pool is None:
            records: list[Decoded] | list[TraceRecord]
            if self.native is not None:  # a chunk at a time: the core's buffers stay small
                decoded: list[Decoded] = []
                for chunk in chunks([page for _cpu, page in batch.pages]):
                    decoded += self._native(chunk)
                records = decoded
            else:
                records = []
                for _cpu, page in batch.pages:
                    self.decoder.decode_page(page, records)
            records.sort(key=_TIMESTAMP)
            if self.workers > 1 and len(batch.pages) >= BUSY_PAGES and not last:
                self.pool = self._pool()
            return records
        pool = self.pool
        pages = [page for _cpu, page in batch.pages]
        tickets = [pool.submit(chunk, batch.formats, deadline) for chunk in chunks(pages)]
        ready = self._collect(deadline)
        self._in_flight = tickets
        return ready

    def drain(self, deadline: float | None = None) -> Sequence[Decoded]:
        """The records still in flight. Past ``deadline`` (the stop's), the workers still
        busy are killed and the chunks they held decoded here
        (:attr:`.WorkerPool.stopped_late_pages`)."""
        return self._collect(deadline) if self.pool is not None else []

    def _collect(self, deadline: float | None = None) -> list[Decoded]:
        assert self.pool is not None
        records: list[Decoded] = []
        for ticket in self._in_flight:
            records += self.pool.result(ticket, deadline)
        self._in_flight = []
        records.sort(key=_TIMESTAMP if self.encode_spans else _TIMESTAMP_FIELD)
        self._add_pool_stats()
        return records

    # --- a capture: every CPU's pages ---------------------------------------------------

    def capture_records(self, capture: DecodedCapture) -> Iterator[Decoded]:
        """A capture's records by timestamp, in the same order in-process and with workers:
        with workers, one of at least :data:`WORKERS_FROM` bytes, decoded a chunk at a
        time, a few chunks ahead (a trace.dat's pages per CPU, the CPUs merged; a
        perf.data's samples in file order, ordered by perf's rounds after, as in-process:
        :func:`.capture.decode.by_rounds`); else in-process, as
        :attr:`.DecodedCapture.records` decodes them."""
        pages, samples = capture.cpu_pages, capture.perf_samples
        pool: WorkerPool | InProcess
        if self.workers <= 1 or capture.size < WORKERS_FROM or not (pages or samples):
            if self.native is None or not (pages or samples):
                yield from capture.records
                return
            pool = InProcess(self)  # the same chunks, in the same order, decoded here
        else:
            self.pool = pool = self._pool()
        formats = capture.formats + capture.other_formats
        try:
            if pages is not None:
                streams = pages()
                ahead = max(1, 2 * pool.count // max(1, len(streams)))
                yield from heapq.merge(
                    *(cpu_records(pool, stream, formats, ahead) for stream in streams),
                    key=_TIMESTAMP,
                )
            elif samples is not None:
                yield from by_rounds(_sample_records(pool, samples(), formats, 2 * pool.count))
        finally:
            if self.pool is not None:
                self._add_pool_stats()

    # --- the end ------------------------------------------------------------------------

    def error(self) -> WorkerError | None:
        """Workers that died or failed, and what became of their pages; None if none did."""
        return self.pool.error() if self.pool is not None else None

    def close(self, deadline: float | None = None) -> None:
        """Stop the workers (by ``deadline``, a ``time.monotonic()`` reading, if given)."""
        if self.pool is not None:
            self.pool.close(deadline)

    def _native(self, items: Sequence[ChunkItem]) -> list[Decoded]:
        """A chunk through the native core, counted in the decoder's stats."""
        assert self.native is not None
        total = self.decoder.stats
        try:
            records, stats = self.native.decode(items)
        finally:
            self.decoder.stats = total
        total.add(stats)
        return records

    def _pool(self) -> WorkerPool:
        decoder = self.decoder
        return WorkerPool(
            self.workers,
            decoder.prefixes,
            decoder.layout,
            decoder.providers.names,
            encode_spans=self.encode_spans,
        )

    def _add_pool_stats(self) -> None:
        """Move what the workers counted into the decoder's stats (the summary's)."""
        assert self.pool is not None
        self.decoder.stats.add(self.pool.stats)
        self.pool.stats = DecoderStats()


class InProcess:
    """A capture's chunks decoded in this process by the native core, with a worker pool's
    ``submit`` and ``result`` (so the chunks and their order are the workers')."""

    count = 1

    def __init__(self, stage: DecodeStage) -> None:
        self._stage = stage
        self._done: dict[int, list[Decoded]] = {}
        self._tickets = 0

    def submit(
        self, items: Sequence[ChunkItem], formats: Sequence[str], deadline: float | None = None
    ) -> int:
        self._tickets += 1
        self._done[self._tickets] = self._stage._native(items)
        return self._tickets

    def result(self, ticket: int, deadline: float | None = None) -> list[Decoded]:
        return self._done.pop(ticket)


def _sample_records(
    pool: WorkerPool | InProcess,
    chunks: Iterator[list[tuple[int, bytes | memoryview]] | None],
    formats: Sequence[str],
    ahead: int,
) -> Iterator[list[Decoded] | None]:
    """A perf.data's sample chunks decoded by the workers, ``ahead`` at a time, given back
    in file order with the rounds' ends (None) where they were."""
    waiting: deque[int | None] = deque()
    for chunk in chunks:
        waiting.append(
            None if chunk is None else pool.submit([(t, bytes(raw)) for t, raw in chunk], formats)
        )
        while len(waiting) > ahead:
            yield _taken(pool, waiting.popleft())
    while waiting:
        yield _taken(pool, waiting.popleft())


def _taken(pool: WorkerPool | InProcess, ticket: int | None) -> list[Decoded] | None:
    return None if ticket is None else pool.result(ticket)
