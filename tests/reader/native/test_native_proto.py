# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The native core's OTLP protobuf against its reference: each span or log it encodes is
the field :mod:`.otlp_proto_direct` writes for the record the Python path checks (the
bytes the OTLP exporter's encoder makes, which that module's tests prove); a record it
hands back comes back decoded, for the join's door, and one whose scope is refused, with
the reason the door gives. Over plain spans and logs (none handed back), genuine, hostile,
mutated and random pages; with the sanitizers in CI, as the JSON's."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord, RejectedRecord
from opentelemetry_exporter_userevents.reader.decode.validation import (
    InvalidRecord,
    RecordChecker,
)
from opentelemetry_exporter_userevents.reader.native import native_core
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_proto_direct
from opentelemetry_exporter_userevents.reader.outputs.exporters.grouping import Unrepresentable
from opentelemetry_exporter_userevents.reader.pipeline.native_chunk import NativeChunks
from opentelemetry_exporter_userevents.reader.pipeline.worker_loop import decode_items
from tests.reader.native.test_native_differential import (
    IDS,
    SETTINGS,
    _decoders,
    _pages,
    _span_record,
    hostile_raws,
    mutated_pages,
    plain_logs,
    plain_spans,
    random_page,
)
from tests.support.pages import record
from tests.support.shape_strategies import GENUINE, RESOURCE_PAYLOAD, hostile_records
from tests.support.span_fixtures import make_spans

PROTO = native_core.load_core(native_core.OTLP_PROTO).core
assert PROTO is not None  # the JSON tests' module fails first when the core does not load


def _expected(records: list[TraceRecord]) -> list[tuple]:
    """What the Python path gives each decoded record: its protobuf field (None where the
    encoder would refuse it), the door's reason, or the record itself (not a span or log)."""
    checker, out = RecordChecker(), []
    for item in records:
        if item.kind not in ("span", "log"):
            out.append(("record", item))
            continue
        try:
            checked = checker.check(item)
        except InvalidRecord as invalid:
            out.append(("rejected", item.timestamp, item.pid, invalid.reason))
            continue
        encode = otlp_proto_direct.span_item if item.kind == "span" else otlp_proto_direct.log_item
        try:
            field = encode(checked)  # type: ignore[arg-type]
        except Unrepresentable:
            field = None
        out.append(("item", checked.timestamp, checked.pid, checked.tracepoint, item.kind,
                    checked.resource_id, checked.truncated, checked.scope_text, field))  # fmt: skip
    return out


def _got(decoded: list) -> list[tuple]:
    out = []
    for item in decoded:
        if type(item) is EncodedRecord:
            assert type(item.item) is bytes
            out.append(("item", item.timestamp, item.pid, item.tracepoint, item.kind,
                        item.resource_id, item.truncated, item.scope_text, item.item))  # fmt: skip
        elif type(item) is RejectedRecord:
            out.append(("rejected", item.timestamp, item.pid, item.reason))
        else:  # handed back: what the Python path does with it
            out += _expected([item])
    return out


def _both(items: list) -> NativeChunks:
    python, native = _decoders()
    records = decode_items(python, items)
    chunks = NativeChunks(PROTO, native, encode_deferred=False)
    decoded, stats = chunks.decode(items)
    assert stats == python.stats
    assert _got(decoded) == _expected(records)
    return chunks


@SETTINGS
@given(st.lists(plain_spans(), min_size=1, max_size=6))
def test_plain_spans_are_the_fields_otlp_proto_direct_writes(spans):
    chunks = _both(_pages([_span_record(span) for span in spans]))
    assert chunks.handed_back == 0 and chunks.decoder.stats.records == len(spans)


@SETTINGS
@given(plain_logs())
def test_plain_logs_are_the_fields_otlp_proto_direct_writes(raws):
    chunks = _both(_pages(raws))
    assert chunks.handed_back == 0 and chunks.decoder.stats.records == len(raws)


def test_genuine_records_come_out_the_same():
    raws = [record(IDS["resource"], RESOURCE_PAYLOAD)]
    for kind, genuine in GENUINE.items():
        raws += [record(IDS[kind], payload) for payload in genuine.payloads]
    raws += [record(IDS["span"], encode_span(s, 7, FTRACE_MAX_PAYLOAD)[0]) for s in make_spans()]
    _both(_pages(raws))
    _both([(1000 + n, raw) for n, raw in enumerate(raws)])


@SETTINGS
@given(st.lists(hostile_records(("span", "log", "resource")), min_size=1, max_size=4))
def test_hostile_records_come_out_the_same(hostiles):
    _both(_pages(hostile_raws(hostiles)))


@SETTINGS
@given(st.randoms(use_true_random=False), st.integers(1, 40))
def test_mutated_pages_come_out_the_same(rng: random.Random, flips: int):
    _both(mutated_pages(rng, flips)[1])


@SETTINGS
@given(st.lists(st.binary(min_size=0, max_size=200), max_size=8), st.integers(0, 2**64 - 1))
def test_random_pages_come_out_the_same(events, ts):
    raw = random_page(events, ts)
    _both([raw + b"\0" * max(0, 4096 - len(raw))])
