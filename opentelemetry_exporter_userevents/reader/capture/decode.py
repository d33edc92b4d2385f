# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A capture file to our records: trace.dat pages or perf.data samples, decoded with the
format files the file carries, merged by timestamp.

The file says which kind it is by its first bytes. EventHeader tracepoints (the Rust, C++
and .NET exporters': :mod:`..decode.eventheader_records`) of the providers read are
decoded beside ours. Format files of other events are ignored; ours that do not match our
schemas are listed, with the reason, and their records counted as undecodable, as the live
reader does.

Decoding streams: the file is mapped, not read, and :attr:`DecodedCapture.records` decodes
as it is iterated. A trace.dat is decoded page by page, each CPU's pages in the order the
kernel filled them (a compressed CPU's chunks inflated one at a time), the CPUs merged by
timestamp (``heapq.merge``), so memory holds a page of records per CPU and one chunk per
compressed CPU, whatever the size of the file; the pages of the file already read are
dropped from the process as it goes (``MADV_DONTNEED``: they stay in the page cache), so
its resident size does not grow with the file either. A perf.data is read sample by
sample; perf writes its per-CPU buffers' samples out of time order, and sorting them waits
for perf's round markers (:meth:`.PerfData.samples_and_rounds`): memory holds the records
of two rounds, or, in a file without round markers (perf always writes them), every record.
"""

from __future__ import annotations

import heapq
import mmap
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple, TypeVar

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader.capture.perf_data import (
    MAGIC as PERF_MAGIC,
)
from opentelemetry_exporter_userevents.reader.capture.perf_data import (
    PerfData,
    PerfDataStats,
    read_perf_data,
)
from opentelemetry_exporter_userevents.reader.capture.raw_events import (
    RawCapture,
    perf_raw,
    trace_dat_raw,
)
from opentelemetry_exporter_userevents.reader.capture.trace_dat import TraceDat, read_trace_dat
from opentelemetry_exporter_userevents.reader.capture.trace_dat_v7 import read_trace_dat_v7
from opentelemetry_exporter_userevents.reader.capture.tracing_data import (
    MAGIC as TRACING_MAGIC,
)
from opentelemetry_exporter_userevents.reader.capture.tracing_data import (
    CaptureError,
    TracingData,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder, TraceRecord
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import ANY_PROVIDER

RELEASE_EVERY = 64 << 20
"""Bytes of pages or samples read between two drops of the mapped file's pages."""

BATCH = 4096
"""Records :func:`batches` hands over at a time."""
SAMPLE_CHUNK = 1024
"""A perf.data's samples decoded at a time (:func:`perf_sample_chunks`)."""

_TIMESTAMP = itemgetter(0)  # TraceRecord.timestamp
_Record = TypeVar("_Record")


@dataclass
class DecodedCapture:
    """What a capture file holds that is ours, and what could not be read."""

    kind: str
    """``trace.dat v6``, ``trace.dat v7, zstd`` (its compression) or ``perf.data``."""
    decoder: RecordDecoder
    """Its ``stats`` count what has been decoded so far: all of it once :attr:`records` is
    exhausted."""
    records: Iterator[TraceRecord] = field(default_factory=lambda: iter(()))
    """Our records by timestamp, decoded as they are iterated (once; ``list(records)`` for
    all of them). A compressed chunk that does not inflate to what it declares raises
    :class:`CaptureError` when iteration reaches it."""
    tracepoints: list[str] = field(default_factory=list)
    """Our tracepoints (and EventHeader ones read) whose formats the file carries."""
    incompatible: dict[str, str] = field(default_factory=dict)
    """Our names, not our formats: the reason."""
    notes: list[str] = field(default_factory=list)
    """What the file holds that was not decoded (instance buffers, compressed records);
    perf.data's skipped records are added once :attr:`records` is exhausted."""
    formats: list[str] = field(default_factory=list)
    """The format texts of :attr:`tracepoints` (for decoding workers)."""
    other_formats: list[str] = field(default_factory=list)
    """Those of our tracepoints with prefixes not read (workers count their records)."""
    cpu_pages: Callable[[], list[Iterator[memoryview]]] | None = None
    """A trace.dat's pages, a stream per CPU in the order :attr:`records` merges them
    (for decoding workers: :mod:`..pipeline.worker_pool`; either this or :attr:`records` is read);
    None for a perf.data (samples, not pages: decoded in-process)."""
    perf_samples: Callable[[], Iterator[list[tuple[int, bytes | memoryview]] | None]] | None = None
    """A perf.data's samples in file order, in lists, None at each round's end
    (:func:`perf_sample_chunks`, for decoding workers, which :func:`by_rounds` orders after;
    either this or :attr:`records` is read); None for a trace.dat."""
    size: int = 0
    """The capture's size in bytes."""
    raw: RawCapture | None = None
    """Every record, ours and the kernel's, by time (``decode --kernel``)."""
    capture_formats: list[tuple[str, str]] = field(default_factory=list)
    """(system, text) of every format file the capture carries (``decode --kernel``)."""


class _Release:
    """Drops the mapped file's pages from the process every :data:`RELEASE_EVERY` bytes
    read. The mapping stays valid: a page touched again is mapped again from the page
    cache."""

    def __init__(self, mapped: mmap.mmap | None) -> None:
        advice = getattr(mmap, "MADV_DONTNEED", None)
        self.drop = (lambda: mapped.madvise(advice)) if mapped and advice is not None else None
        self.read_since = 0

    def read(self, size: int) -> None:
        self.read_since += size
        if self.read_since >= RELEASE_EVERY and self.drop is not None:
            self.read_since = 0
            self.drop()


def decode_file(
    path: str, prefixes: Sequence[str], providers: Sequence[str] = (ANY_PROVIDER,)
) -> DecodedCapture:
    """Open a trace.dat or perf.data; raises :class:`CaptureError` (or OSError). Its
    records decode as :attr:`DecodedCapture.records` is iterated. ``providers``: the
    EventHeader providers read (every one by default)."""
    with open(path, "rb") as f:
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise CaptureError(f"{path} is empty") from None
    # Unmapped when the last view of it goes (records copy what they keep).
    return _decode(memoryview(mapped), _Wanted(prefixes, providers), _Release(mapped))


def decode_bytes(
    data: bytes | memoryview, prefixes: Sequence[str], providers: Sequence[str] = (ANY_PROVIDER,)
) -> DecodedCapture:
    """Decode a capture held in memory (its records, too, as they are iterated)."""
    return _decode(data, _Wanted(prefixes, providers), _Release(None))


def batches(records: Iterable[_Record], size: int = BATCH) -> Iterator[list[_Record]]:
    """``records`` in lists of ``size`` (the last one shorter). If reading them raises
    :class:`CaptureError`, the records read before it are handed over first."""
    batch: list[_Record] = []
    try:
        for record in records:
            batch.append(record)
            if len(batch) >= size:
                yield batch
                batch = []
    except CaptureError:
        if batch:
            yield batch
        raise
    if batch:
        yield batch


class _Wanted(NamedTuple):
    prefixes: Sequence[str]
    providers: Sequence[str]


def _decode(data: bytes | memoryview, prefixes: _Wanted, release: _Release) -> DecodedCapture:
    head = bytes(data[:10])
    if head.startswith(TRACING_MAGIC):
        return _decode_trace_dat(data, prefixes, release)
    if head.startswith(PERF_MAGIC):
        return _decode_perf_data(data, prefixes, release)
    raise CaptureError("not a trace.dat (trace-cmd) or perf.data file")


def _decoder(tracing: TracingData, wanted: _Wanted, kind: str) -> DecodedCapture:
    try:
        layout = PageLayout.from_header_page(tracing.header_page, tracing.page_size)
    except ValueError as error:
        raise CaptureError(f"{kind}: header_page: {error}") from None
    decoded = DecodedCapture(kind, RecordDecoder(wanted.prefixes, layout, wanted.providers))
    decoded.capture_formats = tracing.formats
    for _system, text in tracing.formats:
        try:
            fmt = parse_format(text)
        except ValueError:
            continue  # not a format file we need (ftrace's own have other shapes)
        if decoded.decoder.skip_other_prefix(fmt):
            decoded.other_formats.append(text)
            continue
        if decoded.decoder.kind_of(fmt.name) is None and not decoded.decoder.takes_eventheader(fmt):
            continue
        try:
            decoded.decoder.add(fmt)
        except ValueError as error:
            decoded.incompatible[fmt.name] = str(error)
            continue
        decoded.tracepoints.append(fmt.name)
        decoded.formats.append(text)
    return decoded


def _decode_trace_dat(
    data: bytes | memoryview, prefixes: _Wanted, release: _Release
) -> DecodedCapture:
    version_7 = bytes(data[len(TRACING_MAGIC) : len(TRACING_MAGIC) + 2]) == b"7\0"
    dat = read_trace_dat_v7(data) if version_7 else read_trace_dat(data)
    kind = f"trace.dat v7, {dat.compression}" if version_7 else "trace.dat v6"
    decoded = _decoder(dat.tracing, prefixes, kind)
    decoded.records = _trace_dat_records(dat, decoded.decoder, release)
    decoded.cpu_pages = lambda: [_released(pages, release) for _cpu, pages in dat.cpu_pages()]
    decoded.size = len(data)
    decoded.raw = trace_dat_raw(dat, decoded.decoder.layout)
    if dat.instance_buffers:
        decoded.notes.append(
            "trace-cmd instance buffers not decoded: " + ", ".join(dat.instance_buffers)
        )
    if dat.cut_short:
        decoded.notes.append(f"the file is cut short: {dat.cut_short} bytes of pages missing")
    return decoded


def _trace_dat_records(
    dat: TraceDat, decoder: RecordDecoder, release: _Release
) -> Iterator[TraceRecord]:
    """Every CPU's records, merged by timestamp (a CPU's own order is kept, and on equal
    timestamps the CPU listed first in the file comes first)."""
    streams = [_page_records(pages, decoder, release) for _cpu, pages in dat.cpu_pages()]
    return heapq.merge(*streams, key=_TIMESTAMP)


def _page_records(
    pages: Iterable[memoryview], decoder: RecordDecoder, release: _Release
) -> Iterator[TraceRecord]:
    """One CPU's records, a page decoded only when the previous page's are taken."""
    records: list[TraceRecord] = []
    for page in pages:
        decoder.decode_page(page, records)
        release.read(len(page))
        yield from records
        records.clear()


def _released(pages: Iterable[memoryview], release: _Release) -> Iterator[memoryview]:
    for page in pages:
        yield page
        release.read(len(page))


def _decode_perf_data(
    data: bytes | memoryview, prefixes: _Wanted, release: _Release
) -> DecodedCapture:
    perf = read_perf_data(data)
    decoded = _decoder(perf.tracing, prefixes, "perf.data")
    decoded.records = _perf_records(perf, decoded.decoder, release, decoded.notes)
    decoded.perf_samples = lambda: perf_sample_chunks(perf, release, decoded.notes)
    decoded.size = len(data)
    decoded.raw = perf_raw(perf)
    decoded.raw.notes = lambda: _perf_notes(perf.stats)
    return decoded


def _perf_records(
    perf: PerfData, decoder: RecordDecoder, release: _Release, notes: list[str]
) -> Iterator[TraceRecord]:
    """The samples' records by timestamp (file order on equal timestamps), decoded here."""
    return by_rounds(_decoded(perf_sample_chunks(perf, release, notes), decoder))


def _decoded(
    chunks: Iterable[list[tuple[int, bytes | memoryview]] | None], decoder: RecordDecoder
) -> Iterator[list[TraceRecord] | None]:
    for chunk in chunks:
        if chunk is None:
            yield None
            continue
        records: list[TraceRecord] = []
        for timestamp, raw in chunk:
            decoder.decode_record(timestamp, raw, records)
        yield records


def perf_sample_chunks(
    perf: PerfData, release: _Release, notes: list[str], size: int = SAMPLE_CHUNK
) -> Iterator[list[tuple[int, bytes | memoryview]] | None]:
    """A perf.data's samples (timestamp, raw record) in file order, at most ``size`` a
    list, and None at each round's end (a list never spans one); then its notes."""
    chunk: list[tuple[int, bytes | memoryview]] = []
    for sample in perf.samples_and_rounds():
        if sample is None:
            if chunk:
                yield chunk
                chunk = []
            yield None
            continue
        release.read(len(sample.raw))
        chunk.append((sample.timestamp, sample.raw))
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
    notes.extend(_perf_notes(perf.stats))


def by_rounds(decoded: Iterable[Sequence[Any] | None]) -> Iterator[Any]:
    """Records decoded from a perf.data's samples (lists in file order, None at each
    round's end, as :func:`perf_sample_chunks` gives the samples), by timestamp, file
    order on equal ones. At the end of each round, the records no later sample can precede
    (those up to the newest timestamp of the rounds before it) are given; the rest wait,
    in a heap. Records: a :class:`.TraceRecord`, or a worker's (each has its
    ``timestamp``)."""
    waiting: list[tuple[int, int, Any]] = []
    sequence = 0
    newest = ready = -1  # newest timestamp read; the newest at the previous round's end
    for records in decoded:
        if records is None:
            while waiting and waiting[0][0] <= ready:
                yield heapq.heappop(waiting)[2]
            ready = newest
            continue
        for record in records:
            timestamp = record.timestamp
            heapq.heappush(waiting, (timestamp, sequence, record))
            sequence += 1
            newest = max(newest, timestamp)
    while waiting:
        yield heapq.heappop(waiting)[2]


def _perf_notes(stats: PerfDataStats) -> list[str]:
    notes = []
    if stats.compressed:
        notes.append(
            f"{stats.compressed} compressed batches not decoded (recorded with -z: "
            "record without it, or 'perf inject' to decompress)"
        )
    if stats.corrupt:
        notes.append(f"{stats.corrupt} damaged records skipped")
    if stats.samples_without_raw:
        notes.append(f"{stats.samples_without_raw} samples without a raw record skipped")
    return notes
