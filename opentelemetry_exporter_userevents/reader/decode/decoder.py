# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Ring-buffer pages to decoded span, log and resource records.

The decoder knows our tracepoints by event id, each with the ``format`` file it was
enabled with, and decodes every record of a page by that format (offsets and sizes, see
:class:`~..record.unpack.RecordUnpacker`). EventHeader tracepoints (the Rust, C++ and .NET
exporters') are a second record format: their records keep their event's bytes, for the
validation boundary to decode (:mod:`.eventheader_records`), and so are the metric
exporters' ``otlp_metrics`` records, whose OTLP buffer is kept whole (:mod:`.otlp_metrics`).
It reads no files:
:class:`.TraceReader` feeds it live pages, and tests and benchmarks feed it captured ones.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, Protocol

from opentelemetry_exporter_userevents.abi.format import EventFormat
from opentelemetry_exporter_userevents.abi.ring_buffer import PageError, PageLayout, parse_page
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import (
    EVENTHEADER_KIND,
    Providers,
    eventheader_unpacker,
)
from opentelemetry_exporter_userevents.reader.decode.otlp_metrics import (
    OTLP_METRICS_KIND,
    otlp_metrics_unpacker,
)
from opentelemetry_exporter_userevents.record.schema import Schema
from opentelemetry_exporter_userevents.record.tracepoints import ANY_PREFIX, parse_tracepoint
from opentelemetry_exporter_userevents.record.unpack import RecordUnpacker


class TraceRecord(NamedTuple):
    """One decoded record (a named tuple: the reader makes many of them)."""

    timestamp: int
    """Trace-clock time of the write (ns, ``local`` clock: not the span's own times)."""
    kind: str
    """``span``, ``log``, ``resource``, a metric kind, ``eventheader`` or ``otlp_metrics``."""
    tracepoint: str
    pid: int
    values: dict[str, Any]


_PID = struct.Struct("<i").unpack_from


@dataclass
class DecoderStats:
    records: int = 0
    """Records decoded."""
    pages: int = 0
    corrupt_pages: int = 0
    """Pages that did not decode, skipped with their records."""
    undecodable: int = 0
    """Records of an unknown event id, or whose fields did not decode, skipped."""
    other_prefixes: int = 0
    """Records of our tracepoints with a prefix not read (``decode --prefix``), or of
    EventHeader providers not read (``--provider``), skipped."""
    pages_with_missed_events: int = 0
    """Pages the kernel marked: events were lost before them."""

    def add(self, other: DecoderStats) -> None:
        """Count ``other``'s too (a worker's chunk, the workers' total)."""
        for name in _DECODER_COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


_DECODER_COUNTS = tuple(f.name for f in fields(DecoderStats))


class _Unpacker(Protocol):
    def unpack(self, record: bytes | bytearray | memoryview, /) -> dict[str, Any]: ...


@dataclass(frozen=True)
class _Tracepoint:
    name: str
    kind: str
    unpacker: _Unpacker | RecordUnpacker


class RecordDecoder:
    """Decodes pages of a buffer holding our tracepoints' records."""

    def __init__(
        self,
        prefix: str | Sequence[str] = "otel",
        layout: PageLayout | None = None,
        providers: Sequence[str] = (),
    ) -> None:
        """``prefix``: one prefix or several; ``*`` stands for every prefix. ``providers``:
        the EventHeader providers read (``*``: all; none by default)."""
        self.layout = layout or PageLayout()
        self.stats = DecoderStats()
        self.prefixes = (prefix,) if isinstance(prefix, str) else tuple(prefix)
        self.every_prefix = ANY_PREFIX in self.prefixes
        self.providers = Providers(providers)
        self._by_id: dict[int, _Tracepoint] = {}
        self._other_prefixes: set[int] = set()
        self.version = 0
        """Changes whenever an event id is (re)mapped: a native decoder's cue to take the
        formats again (:meth:`plans`)."""

    def kind_of(self, tracepoint: str) -> tuple[str, Schema] | None:
        """(kind, schema) if ``tracepoint`` has one of our names with a prefix this decoder
        reads, else None. The format still has to match (:meth:`add` checks it)."""
        parsed = parse_tracepoint(tracepoint)
        if parsed is None or not (self.every_prefix or parsed.prefix in self.prefixes):
            return None
        return parsed.kind, parsed.schema

    def takes_eventheader(self, fmt: EventFormat) -> bool:
        """Whether ``fmt`` is an EventHeader tracepoint of a provider this decoder reads, or
        the ``otlp_metrics`` tracepoint and this decoder reads it (``--provider``)."""
        if self.providers.metrics and otlp_metrics_unpacker(fmt) is not None:
            return True
        return self.providers.takes(fmt.name) and eventheader_unpacker(fmt) is not None

    def add(self, fmt: EventFormat) -> str:
        """Decode records of event ``fmt.id`` with ``fmt`` from now on; return the kind.
        Raises ValueError if the name is not ours or the format lacks our fields. Any
        EventHeader tracepoint is taken (the caller chose it: :meth:`takes_eventheader`;
        a worker takes what its main process sends)."""
        known = self.kind_of(fmt.name)
        if known is None:
            metrics = otlp_metrics_unpacker(fmt)
            if metrics is not None:
                self._by_id[fmt.id] = _Tracepoint(fmt.name, OTLP_METRICS_KIND, metrics)
                self.version += 1
                return OTLP_METRICS_KIND
            eventheader = eventheader_unpacker(fmt)
            if eventheader is not None:
                self._by_id[fmt.id] = _Tracepoint(fmt.name, EVENTHEADER_KIND, eventheader)
                self.version += 1
                return EVENTHEADER_KIND
            raise ValueError(f"{fmt.name} is not one of our tracepoints")
        kind, schema = known
        self._by_id[fmt.id] = _Tracepoint(fmt.name, kind, schema.unpacker(fmt))
        self.version += 1
        return kind

    def plans(self) -> list[tuple[int, str, str, RecordUnpacker]]:
        """(event id, kind, tracepoint, unpacker) of each tracepoint of ours decoded by
        its format's offsets (spans, logs, resources, metric points; not EventHeader)."""
        return [
            (event_id, tp.kind, tp.name, tp.unpacker)
            for event_id, tp in list(self._by_id.items())  # a scan may add one meanwhile
            if isinstance(tp.unpacker, RecordUnpacker)
        ]

    def skip_other_prefix(self, fmt: EventFormat) -> bool:
        """If ``fmt`` is one of our tracepoints with a prefix this decoder does not read, or
        an EventHeader one of a provider it does not read, count its records as
        :attr:`DecoderStats.other_prefixes` (not undecodable); the ``otlp_metrics``
        tracepoint likewise when it is not read."""
        if otlp_metrics_unpacker(fmt) is not None:
            if self.providers.metrics:
                return False
        elif eventheader_unpacker(fmt) is not None:
            if self.providers.takes(fmt.name):
                return False
        elif self.kind_of(fmt.name) is not None or parse_tracepoint(fmt.name) is None:
            return False
        self._other_prefixes.add(fmt.id)
        return True

    def decode_page(self, raw: bytes | bytearray | memoryview, out: list[TraceRecord]) -> None:
        """Append the records of one page to ``out``; count what cannot be decoded."""
        stats = self.stats
        stats.pages += 1
        try:
            page = parse_page(raw, self.layout)
        except PageError:
            stats.corrupt_pages += 1
            return
        if page.missed:
            stats.pages_with_missed_events += 1
        by_id = self._by_id
        before = len(out)
        for timestamp, record in page.events:
            if len(record) < 8:
                stats.undecodable += 1
                continue
            event_id = record[0] | (record[1] << 8)  # common_type, u16 at 0
            tracepoint = by_id.get(event_id)
            if tracepoint is None:
                if event_id in self._other_prefixes:
                    stats.other_prefixes += 1
                else:
                    stats.undecodable += 1
                continue
            try:
                values = tracepoint.unpacker.unpack(record)
            except ValueError:
                stats.undecodable += 1
                continue
            pid = _PID(record, 4)[0]  # common_pid, s32 at 4
            out.append(TraceRecord(timestamp, tracepoint.kind, tracepoint.name, pid, values))
        stats.records += len(out) - before

    def decode_record(
        self, timestamp: int, record: bytes | memoryview, out: list[TraceRecord]
    ) -> bool:
        """Append one record taken outside a page (a perf sample's raw data); False, and
        counted, if it is not one of ours or does not decode."""
        stats = self.stats
        event_id = record[0] | (record[1] << 8) if len(record) >= 8 else -1
        tracepoint = self._by_id.get(event_id)
        if tracepoint is None:
            if event_id in self._other_prefixes:
                stats.other_prefixes += 1
            else:
                stats.undecodable += 1
            return False
        try:
            values = tracepoint.unpacker.unpack(record)
        except ValueError:
            stats.undecodable += 1
            return False
        pid = _PID(record, 4)[0]
        out.append(TraceRecord(timestamp, tracepoint.kind, tracepoint.name, pid, values))
        stats.records += 1
        return True

    def decode_pages(self, pages: list[bytes]) -> list[TraceRecord]:
        """The records of captured pages, in page order."""
        records: list[TraceRecord] = []
        for page in pages:
            self.decode_page(page, records)
        return records
