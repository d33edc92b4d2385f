# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A chunk of pages (or of a perf.data's samples) through the native core: what
:func:`.worker_loop.decode_chunk` gives for it, the same records in the same order, with
the same counts, made in C where the core can (:mod:`..native`).

The core encodes the spans and logs of our tracepoints, as OTLP/JSON items (a worker's, and
OTLP/JSON lines in this process) or OTLP protobuf fields (the direct OTLP senders'); every
other record (resources,
metric points, EventHeader records, anything the core is not sure of) and every page it
would not parse come back as they are, and take the Python path here, in their place:
the Python path is the reference the core is tested against (tests/reader/native/), so a
record the core declines costs time, never a difference. What the core cannot check
alone, a record's scope, is checked here once per distinct text.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry_exporter_userevents.reader.decode.checked_records import CheckedScope
from opentelemetry_exporter_userevents.reader.decode.decoder import (
    DecoderStats,
    RecordDecoder,
    TraceRecord,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_check import EventHeaderChecker
from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord, RejectedRecord
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord, RecordChecker
from opentelemetry_exporter_userevents.reader.native.native_core import (
    CHARS,
    E_LOG,
    E_PAGE,
    E_RECORD,
    E_SPAN,
    INT,
    LOG,
    SPAN,
    TEXT,
    NativeCore,
    Result,
)
from opentelemetry_exporter_userevents.reader.pipeline.worker_loop import (
    ChunkItem,
    Decoded,
    Interned,
    check_and_encode,
)
from opentelemetry_exporter_userevents.record.schema import LOG as LOG_SCHEMA
from opentelemetry_exporter_userevents.record.schema import SPAN as SPAN_SCHEMA
from opentelemetry_exporter_userevents.record.tracepoints import LOG_KIND, SPAN_KIND

_KINDS = {SPAN_KIND: (SPAN, SPAN_SCHEMA), LOG_KIND: (LOG, LOG_SCHEMA)}
_FIELD_KINDS = {"": INT, "chars": CHARS, "text": TEXT}


class NativeChunks:
    """Decodes chunks with ``decoder``'s formats (taken again whenever they change) through
    ``core``; checks and encodes as a worker does (``encode_spans`` on)."""

    def __init__(
        self,
        core: NativeCore,
        decoder: RecordDecoder,
        checker: RecordChecker | None = None,
        eventheader: EventHeaderChecker | None = None,
        encode_deferred: bool = True,
    ) -> None:
        """``encode_deferred``: the records the core hands back are checked and encoded
        here, as a worker does (OTLP/JSON); off, they are passed on decoded, for the join's
        validation door (in this process, for OTLP protobuf: the output encodes them)."""
        self.encode_deferred = encode_deferred
        self.core = core
        self.decoder = decoder
        self.checker = checker or RecordChecker()
        self.eventheader = eventheader or EventHeaderChecker()
        self._version = -1
        self._names: dict[int, tuple[str, str]] = {}
        """Plan number: (tracepoint, kind)."""
        self.handed_back = 0
        """Records and pages the core left to the Python path."""

    def _take_formats(self) -> None:
        decoder, core = self.decoder, self.core
        if decoder.version == self._version:
            return
        core.clear()
        self._names = {}
        for event_id, kind, name, unpacker in decoder.plans():
            native = _KINDS.get(kind)
            if native is None:
                continue
            plan_kind, schema = native
            fields = []
            for field in schema.fields:
                offset, size, field_kind, signed = unpacker.fields[field.name]
                fields.append((offset, size, _FIELD_KINDS[field_kind], signed and not field_kind))
            number = core.set_plan(event_id, plan_kind, fields, unpacker.needed)
            if number >= 0:
                self._names[number] = (name, kind)
        self._version = decoder.version

    def decode(self, items: Sequence[ChunkItem]) -> tuple[list[Decoded], DecoderStats]:
        """As :func:`.worker_loop.decode_chunk`: the chunk's records, checked and encoded,
        and what the decoder counted."""
        self.decoder.stats = stats = DecoderStats()
        if not items:
            return [], stats
        self._take_formats()
        if isinstance(items[0], tuple):
            samples = [item for item in items if isinstance(item, tuple)]
            data = b"".join([bytes(raw) for _, raw in samples])
            lengths = [len(raw) for _, raw in samples]
            result = self.core.decode_records(data, lengths, [t for t, _ in samples])
        else:
            pages = [item for item in items if not isinstance(item, tuple)]
            data = b"".join(pages)
            layout = self.decoder.layout
            result = self.core.decode_pages(
                data,
                [len(page) for page in pages],
                (layout.timestamp_offset, layout.commit_offset, layout.data_offset),
            )
        stats.pages += result.pages
        stats.pages_with_missed_events += result.missed_pages
        stats.records += result.records
        return self._records(result, memoryview(data)), stats

    def _records(self, result: Result, data: memoryview) -> list[Decoded]:
        out: list[Decoded] = []
        decoder, checker, names, text = self.decoder, self.checker, self._names, result.text
        interned = Interned()
        scope_texts = [str(data[off : off + size], "utf-8") for off, size in result.scopes]
        scopes: dict[tuple[int, str], CheckedScope | str | None] = {}
        for entry in result.entries:
            timestamp, rid, item_off, item_len, rec_off, rec_len, pid, scope, plan, status, cut = (
                entry
            )
            if status == E_SPAN or status == E_LOG:
                tracepoint, kind = names[plan]
                checked = scopes.get((scope, kind), _UNSEEN)
                if checked is _UNSEEN:
                    try:
                        checked = checker.scope(scope_texts[scope], kind)
                    except InvalidRecord as invalid:
                        checked = invalid.reason
                    scopes[scope, kind] = checked
                if type(checked) is str:
                    out.append(RejectedRecord(timestamp, pid, checked))
                    continue
                out.append(
                    EncodedRecord(
                        timestamp,
                        pid,
                        tracepoint,
                        kind,
                        rid,
                        cut,
                        scope_texts[scope],
                        checked,  # type: ignore[arg-type]
                        text[item_off : item_off + item_len],
                        None,
                    )
                )
                continue
            records: list[TraceRecord] = []
            self.handed_back += 1
            if status == E_RECORD:
                decoder.decode_record(timestamp, data[rec_off : rec_off + rec_len], records)
            elif status == E_PAGE:
                decoder.decode_page(data[rec_off : rec_off + rec_len], records)
            if self.encode_deferred:
                check_and_encode(records, checker, self.eventheader, True, out, interned)
            else:
                out += records
        return out


_UNSEEN = object()
