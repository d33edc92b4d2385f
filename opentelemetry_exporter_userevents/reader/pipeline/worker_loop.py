# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What a decoding worker does with a chunk of pages (:mod:`.worker_pool`): decode, check at
the validation boundary, and encode each span or log as its OTLP/JSON item; the main
process does the same with a chunk whose worker died (:func:`decode_chunk`), so the result
is the same either way.

A worker sends back, per record: an :class:`.EncodedRecord` for a span or log that passed
the checks (its item, and what the join reads; for an EventHeader record, the resource its
writer named beside it, one object per resource in a chunk: pickled once), a
:class:`.RejectedRecord` for one that did not (the reason), and resources and metric
points whole, as :class:`.TraceRecord` (the main process checks them: they are few, and
the join needs them whole). With ``encode_spans`` off (``record --kernel``: the kernel view
adds to a span in the main process, where the kernel's events are), a span comes back
checked, as a :class:`.CheckedSpan`, and an EventHeader record whole; logs are encoded.
"""

from __future__ import annotations

import os
import queue
import threading
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedLog,
    CheckedResource,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import (
    DecoderStats,
    RecordDecoder,
    TraceRecord,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_check import EventHeaderChecker
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import EVENTHEADER_KIND
from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord, RejectedRecord
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord, RecordChecker
from opentelemetry_exporter_userevents.reader.native.native_core import load_core
from opentelemetry_exporter_userevents.reader.outputs.exporters.grouping import Unrepresentable
from opentelemetry_exporter_userevents.reader.outputs.exporters.otlp_json_direct import (
    log_item,
    span_item,
)
from opentelemetry_exporter_userevents.record.tracepoints import LOG_KIND, SPAN_KIND

Decoded = TraceRecord | EncodedRecord | RejectedRecord | CheckedSpan
"""A record as a worker sends it back (what :meth:`.JoinStage.add` takes)."""
ChunkItem = bytes | tuple[int, bytes]
"""What a chunk holds: ring-buffer pages, or a perf.data's samples (timestamp, raw record)
in file order."""


@dataclass
class Interned:
    """A chunk's scope texts and resources, one object each."""

    scopes: dict[str, str] = field(default_factory=dict)
    resources: dict[int, CheckedResource] = field(default_factory=dict)


def check_and_encode(
    records: Iterable[TraceRecord],
    checker: RecordChecker,
    eventheader: EventHeaderChecker | None = None,
    encode_spans: bool = True,
    out: list[Decoded] | None = None,
    interned: Interned | None = None,
) -> list[Decoded]:
    """What a worker sends back for decoded records (see :data:`Decoded`), appended to
    ``out``; ``interned``: the chunk's scope texts and resources so far (a chunk checked
    a few records at a time: :mod:`.native_chunk`)."""
    if out is None:
        out = []
    # one object per scope text, and per resource: pickled once per chunk
    if interned is None:
        interned = Interned()
    scopes, resources = interned.scopes, interned.resources
    for record in records:
        timestamp, kind, tracepoint, pid, values = record
        checked: CheckedSpan | CheckedLog
        resource: CheckedResource | None = None
        try:
            if kind == SPAN_KIND:
                checked = checker.span(values, timestamp, pid, tracepoint)
                if not encode_spans:
                    out.append(checked)
                    continue
            elif kind == LOG_KIND:
                checked = checker.log(values, timestamp, pid, tracepoint)
            elif kind == EVENTHEADER_KIND and encode_spans:
                if eventheader is None:
                    eventheader = EventHeaderChecker()
                checked, resource = eventheader.check(values, timestamp, pid, tracepoint)
                resource = resources.setdefault(resource.resource_id, resource)
            else:
                out.append(record)
                continue
        except InvalidRecord as invalid:
            out.append(RejectedRecord(timestamp=timestamp, pid=pid, reason=invalid.reason))
            continue
        item: str | None
        try:
            item = span_item(checked) if isinstance(checked, CheckedSpan) else log_item(checked)
        except Unrepresentable:
            item = None
        scope_text = scopes.setdefault(checked.scope_text, checked.scope_text)
        out.append(
            EncodedRecord(
                timestamp=timestamp,
                pid=pid,
                tracepoint=tracepoint,
                kind=SPAN_KIND if isinstance(checked, CheckedSpan) else LOG_KIND,
                resource_id=checked.resource_id,
                truncated=checked.truncated,
                scope_text=scope_text,
                scope=checked.scope,
                item=item,
                resource=resource,
            )
        )
    return out


def decode_chunk(
    decoder: RecordDecoder,
    checker: RecordChecker,
    items: Iterable[ChunkItem],
    eventheader: EventHeaderChecker | None = None,
    encode_spans: bool = True,
) -> tuple[list[Decoded], DecoderStats]:
    """A chunk of pages (or of a perf.data's samples), decoded, checked and encoded; and
    what the decoder counted."""
    decoder.stats = stats = DecoderStats()
    records = decode_items(decoder, items)
    return check_and_encode(records, checker, eventheader, encode_spans), stats


def decode_items(decoder: RecordDecoder, items: Iterable[ChunkItem]) -> list[TraceRecord]:
    """A chunk's records, decoded (a page, or a perf.data sample's raw record and its
    timestamp), in order; the decoder counts."""
    records: list[TraceRecord] = []
    for item in items:
        if isinstance(item, tuple):
            decoder.decode_record(item[0], item[1], records)
        else:
            decoder.decode_page(item, records)
    return records


def add_formats(decoder: RecordDecoder, texts: Iterable[str]) -> None:
    for text in texts:
        try:
            fmt = parse_format(text)
            if not decoder.skip_other_prefix(fmt):
                decoder.add(fmt)
        except ValueError:
            continue  # the main process refused it too


def serve(
    tasks: Connection,
    results: Connection,
    prefixes: Sequence[str],
    layout: PageLayout,
    providers: Sequence[str] = (),
    encode_spans: bool = True,
) -> None:
    """A worker: formats and chunks of pages in, decoded chunks out, until its pipe closes.
    Results go out through a thread, so the worker keeps taking chunks while the main
    process is busy (neither side ever blocks on the other's full pipe)."""
    decoder = RecordDecoder(prefixes, layout, providers)
    checker = RecordChecker()
    eventheader = EventHeaderChecker()
    native = None
    if encode_spans:  # the main process's choice: the same setting, the same build
        from opentelemetry_exporter_userevents.reader.pipeline.native_chunk import (  # noqa: PLC0415 - it builds on this module
            NativeChunks,
        )

        core = load_core().core
        if core is not None:
            native = NativeChunks(core, decoder, checker, eventheader)
    outgoing: queue.Queue[Any] = queue.Queue()

    def send() -> None:
        while (message := outgoing.get()) is not None:
            try:
                results.send(message)
            except OSError:
                os._exit(1)  # the main process is gone

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    outgoing.put(("ready",))  # its imports done: from now on, a chunk takes little time
    try:
        while True:
            try:
                task = tasks.recv()
            except EOFError:
                break
            if task is None:
                break
            if task[0] == "formats":
                add_formats(decoder, task[1])
                continue
            _, ticket, pages = task
            if native is not None:
                decoded = native.decode(pages)
            else:
                decoded = decode_chunk(decoder, checker, pages, eventheader, encode_spans)
            outgoing.put((ticket, *decoded))
    except BaseException:  # noqa: BLE001 - a bug: the main process reports it
        outgoing.put(("error", traceback.format_exc(limit=8)))
    outgoing.put(None)
    sender.join()
