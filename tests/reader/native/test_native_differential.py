# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The native core against its reference, the Python path: for every chunk of pages (or of
perf samples), genuine, hostile or mutated, :class:`.NativeChunks` gives exactly what
:func:`.worker_loop.decode_chunk` gives (the same records, items byte for byte, the same
reasons, the same counts); and for plain spans and logs the core encodes them itself
(none handed back to Python), so a core that declined everything would fail here.

CI runs these with the core built with AddressSanitizer and UndefinedBehaviorSanitizer too
(``build_core --sanitize``). ``OTEL_EXPORTER_USER_EVENTS_READER_CORE=python`` (the pure
build's run) skips them; otherwise a core that does not load fails them."""

from __future__ import annotations

import contextlib
import os
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from opentelemetry_exporter_userevents._export.log_encoder import encode_log
from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD, PageLayout
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.decode.eventheader_check import EventHeaderChecker
from opentelemetry_exporter_userevents.reader.decode.validation import RecordChecker
from opentelemetry_exporter_userevents.reader.native import native_core
from opentelemetry_exporter_userevents.reader.pipeline import worker_loop
from opentelemetry_exporter_userevents.reader.pipeline.native_chunk import NativeChunks
from opentelemetry_exporter_userevents.record import schema
from tests.support.captures import format_text
from tests.support.pages import absolute, data_event, padding, page, record, time_extend
from tests.support.shape_strategies import (
    GENUINE,
    RESOURCE_PAYLOAD,
    SCHEMAS,
    hostile_records,
    repack,
    unpack,
)
from tests.support.span_fixtures import make_logs, make_spans

if os.environ.get(native_core.READER_CORE, "").strip().lower() == "python":
    pytest.skip("the pure build's run: no native core", allow_module_level=True)

CORE = native_core.load_core().core
if CORE is None:
    pytest.fail(
        "the native core did not load: build it with "
        "python -m opentelemetry_exporter_userevents.reader.native.build_core",
        pytrace=False,
    )

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
IDS = {kind: 10 + n for n, kind in enumerate(SCHEMAS)}
"""An event id per kind (spans, logs, resources, metric kinds)."""
UNKNOWN_ID = 99
FORMATS = [format_text(SCHEMAS[kind], f"{SCHEMAS[kind].name}.1", IDS[kind]) for kind in SCHEMAS]
# the log tracepoints are per severity class (otel_log_info); the schema's name is otel_log
FORMATS = [text.replace("name: otel_log.1", "name: otel_log_info.1") for text in FORMATS]
# ...and the kernel says a char[] is signed (as x86 does): the core takes it all the same
SIGNED_CHARS = [text.replace("size:32;\tsigned:0", "size:32;\tsigned:1") for text in FORMATS]


def _decoders(formats: list[str] = FORMATS) -> tuple[RecordDecoder, RecordDecoder]:
    python, native = RecordDecoder("*"), RecordDecoder("*")
    worker_loop.add_formats(python, formats)
    worker_loop.add_formats(native, formats)
    return python, native


def _both(items: list, formats: list[str] = FORMATS) -> NativeChunks:
    """Decode ``items`` both ways; assert the same; the native decoder (its counts)."""
    python, native = _decoders(formats)
    expected = worker_loop.decode_chunk(python, RecordChecker(), items, EventHeaderChecker())
    chunks = NativeChunks(CORE, native)
    got = chunks.decode(items)
    assert got[1] == expected[1], (got[1], expected[1])
    assert len(got[0]) == len(expected[0])
    for mine, theirs in zip(got[0], expected[0], strict=True):
        assert mine == theirs, (mine, theirs)
    return chunks


# --- records ----------------------------------------------------------------------------

_PRINTABLE = st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"))
_TEXT = st.text(_PRINTABLE | st.sampled_from(' \n\t"\\/'), max_size=12)
"""Texts the value encoding writes without a \\u escape (C0 and C1 controls, U+2028 and
U+2029 take one, and such texts go to the Python path)."""
_PLAIN = st.text(_PRINTABLE | st.just(" "), max_size=20).filter(
    lambda text: not text.startswith(('"', "{"))
)
"""A plain-text field written as it is (record.plain_text: printable, not "... or {...)."""
_PLAIN_VALUES = st.recursive(
    st.one_of(
        _TEXT, st.integers(-(2**63), 2**63 - 1), st.booleans(), st.sampled_from([0, -1, 2**63 - 1])
    ),
    lambda inner: st.lists(inner, max_size=3).map(tuple),
    max_leaves=6,
)
_KEYS = _TEXT.filter(lambda key: not key.startswith("~"))
_ATTRIBUTES = st.dictionaries(_KEYS, _PLAIN_VALUES, max_size=5)
"""(A key that starts with ~ is written escaped, ~~: the Python path restores it.)"""
_IDS = st.integers(1, 2**128 - 1)


@st.composite
def plain_spans(draw: st.DrawFn) -> ReadableSpan:
    """Spans of the shapes the core encodes itself: plain names, attributes of strings,
    integers, booleans and lists of them, events, links and parents, no trace state."""
    trace_id = draw(_IDS)
    context = SpanContext(trace_id, draw(st.integers(1, 2**64 - 1)), False, TraceFlags(1))
    parent = None
    if draw(st.booleans()):
        parent = SpanContext(trace_id, draw(st.integers(0, 2**64 - 1)), draw(st.booleans()))
    start = draw(st.integers(0, 2**63))
    code = draw(st.sampled_from(list(StatusCode)))
    return ReadableSpan(
        name=draw(_PLAIN),
        context=context,
        parent=parent,
        resource=Resource({}),
        attributes=draw(_ATTRIBUTES),
        events=[
            Event(draw(_TEXT), draw(_ATTRIBUTES), draw(st.integers(0, 2**63)))
            for _ in range(draw(st.integers(0, 2)))
        ],
        links=[
            Link(
                SpanContext(draw(_IDS), draw(_IDS) >> 64 or 1, draw(st.booleans())),
                draw(_ATTRIBUTES),
            )
            for _ in range(draw(st.integers(0, 2)))
        ],  # fmt: skip
        kind=draw(st.sampled_from(list(SpanKind))),
        status=Status(code, draw(_PLAIN) if code is StatusCode.ERROR else None),
        start_time=start,
        end_time=start + draw(st.integers(0, 10**9)),
        instrumentation_scope=InstrumentationScope(draw(_TEXT) or "s", draw(st.none() | _TEXT)),
    )


def _span_record(span: ReadableSpan) -> bytes:
    return record(IDS["span"], encode_span(span, 7, FTRACE_MAX_PAYLOAD)[0])


def _pages(records: list[bytes], extras: list[bytes] = ()) -> list[bytes]:
    """Records a few to a page, with the kernel's other events between them."""
    pages, events = [], list(extras)
    for n, raw in enumerate(records):
        events.append(data_event(n % 5, raw))
        if n % 3 == 1:
            events.append(time_extend(1 << 28))
        if sum(map(len, events)) > 3000:
            pages.append(page(1000 + n, events))
            events = []
    if events:
        pages.append(page(99, events))
    return pages


def hostile_raws(hostiles: list) -> list[bytes]:
    """A genuine span's record, then the hostile ones the kernel would take."""
    raws = [record(IDS["span"], GENUINE["span"].payloads[0])]
    for hostile in hostiles:
        payload = repack(hostile.kind, hostile.values)
        if payload is not None:
            raws.append(record(IDS[hostile.kind], payload, pid=666))
    return raws


def mutated_pages(rng: random.Random, flips: int) -> tuple[list[bytes], list[bytes]]:
    """Genuine records, and pages of them with ``flips`` bytes changed, most in the first
    600 bytes of a page (its header and first events)."""
    raws = [record(IDS["span"], p) for p in GENUINE["span"].payloads]
    raws += [record(IDS["log"], p) for p in GENUINE["log"].payloads]
    raws += [_span_record(s) for s in make_spans()]
    pages = [bytearray(p) for p in _pages(raws)]
    for _ in range(flips):
        target = rng.choice(pages)
        at = rng.randrange(0, 600) if rng.random() < 0.7 else rng.randrange(len(target))
        target[at] = rng.randrange(256)
    return raws, [bytes(p) for p in pages]


def random_page(events: list[bytes], ts: int) -> bytes:
    """A page header and events of any bytes, its commit word's flags from ``ts``."""
    body = b"".join(struct.pack("<I", len(e) << 5 | (len(e) // 4 % 29)) + e for e in events)
    return struct.pack("<QQ", ts, len(body) | (ts & 3) << 30) + body


# --- the tests ----------------------------------------------------------------------------


@SETTINGS
@given(st.lists(plain_spans(), min_size=1, max_size=6))
def test_plain_spans_are_encoded_by_the_core_as_the_python_path_encodes_them(spans):
    chunks = _both(_pages([_span_record(span) for span in spans]))
    assert chunks.decoder.stats.records == len(spans)
    assert chunks.handed_back == 0


def test_genuine_records_of_every_kind_come_out_the_same():
    raws = [record(IDS["resource"], RESOURCE_PAYLOAD)]
    for kind, genuine in GENUINE.items():
        raws += [record(IDS[kind], payload) for payload in genuine.payloads]
    raws += [record(IDS["span"], encode_span(s, 7, FTRACE_MAX_PAYLOAD)[0]) for s in make_spans()]
    raws += [record(IDS["log"], encode_log(r, 7, FTRACE_MAX_PAYLOAD)[0]) for r in make_logs()]
    raws += [record(UNKNOWN_ID, b"\1\0\0\0"), b"\1\0"]
    for formats in (FORMATS, SIGNED_CHARS):
        _both(_pages(raws, [padding(12), absolute(5 << 40)]), formats)
        _both([(1000 + n, raw) for n, raw in enumerate(raws)], formats)  # perf samples


_BODIES = st.one_of(_PLAIN_VALUES, st.none(), st.dictionaries(_KEYS, _PLAIN_VALUES, max_size=3))


@st.composite
def plain_logs(draw: st.DrawFn) -> list[bytes]:
    """Records of logs of the shapes the core encodes itself (a few, some in a span)."""
    drawn = draw(
        st.lists(
            st.tuples(
                _BODIES,
                _ATTRIBUTES,
                st.sampled_from(list(SeverityNumber)),
                st.none() | _PLAIN,
                st.none() | _PLAIN,
                st.booleans(),
            ),
            min_size=1,
            max_size=5,
        )
    )
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource({}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger("lib.log", "0.1")
    tracer = TracerProvider().get_tracer("t")
    for body, attributes, severity, text, event_name, in_span in drawn:
        with tracer.start_as_current_span("work") if in_span else contextlib.nullcontext():
            logger.emit(body=body, attributes=attributes, severity_number=severity,
                        severity_text=text, event_name=event_name)  # fmt: skip
    return [record(IDS["log"], encode_log(r, 7, FTRACE_MAX_PAYLOAD)[0])
            for r in memory.get_finished_logs()]  # fmt: skip


@SETTINGS
@given(plain_logs())
def test_plain_logs_are_encoded_by_the_core_as_the_python_path_encodes_them(raws):
    chunks = _both(_pages(raws))
    assert chunks.decoder.stats.records == len(raws)
    assert chunks.handed_back == 0


@SETTINGS
@given(st.lists(hostile_records(("span", "log", "resource")), min_size=1, max_size=4))
def test_hostile_records_come_out_the_same(hostiles):
    raws = hostile_raws(hostiles)
    _both(_pages(raws))
    _both([(n, raw) for n, raw in enumerate(raws)])


@SETTINGS
@given(st.randoms(use_true_random=False), st.integers(1, 40))
def test_mutated_pages_come_out_the_same(rng: random.Random, flips: int):
    """Genuine pages with bytes flipped anywhere: headers, lengths, offsets, texts."""
    raws, pages = mutated_pages(rng, flips)
    _both(pages)
    samples = [bytearray(r) for r in raws]
    for _ in range(flips):
        target = rng.choice(samples)
        target[rng.randrange(len(target))] = rng.randrange(256)
    _both([(n, bytes(raw)) for n, raw in enumerate(samples)])


@SETTINGS
@given(st.lists(st.binary(min_size=0, max_size=200), max_size=8), st.integers(0, 2**64 - 1))
def test_random_pages_come_out_the_same(events, ts):
    raw = random_page(events, ts)
    _both([raw + b"\0" * max(0, 4096 - len(raw))])
    _both([raw[: max(0, len(raw) - (ts % 50))]])


def test_a_timestamp_past_64_bits_is_left_to_python_which_keeps_it():
    raw = record(IDS["span"], GENUINE["span"].payloads[0])
    pages = [
        page(2**64 - 2, [data_event(5, raw)]),
        page(2**64 - 1, [time_extend(2**40), data_event(1, raw)]),
    ]
    chunks = _both(pages)
    assert chunks.handed_back == 2


def test_a_format_change_is_taken_at_the_next_chunk():
    python, native = _decoders()
    chunks = NativeChunks(CORE, native)
    raws = [_span_record(s) for s in make_spans()]
    chunks.decode(_pages(raws))
    moved = FORMATS[0].replace(f"ID: {IDS['span']}", "ID: 77")
    worker_loop.add_formats(python, [moved])
    worker_loop.add_formats(native, [moved])
    items = _pages([record(77, r[8:]) for r in raws])
    expected = worker_loop.decode_chunk(python, RecordChecker(), items, EventHeaderChecker())
    assert chunks.decode(items) == expected


def test_layout_from_another_header_page_is_followed():
    layout = PageLayout(timestamp_offset=0, commit_offset=8, data_offset=16, page_size=4096)
    python, native = _decoders()
    python.layout = native.layout = layout
    raws = [record(IDS["span"], p) for p in GENUINE["span"].payloads]
    items = _pages(raws)
    expected = worker_loop.decode_chunk(python, RecordChecker(), items, EventHeaderChecker())
    assert NativeChunks(CORE, native).decode(items) == expected


_PLAIN_SPAN = ReadableSpan(
    name="GET /",
    context=SpanContext(1, 2, False, TraceFlags(1)),
    resource=Resource({}),
    attributes={},
    kind=SpanKind.SERVER,
    start_time=1,
    end_time=2,
    instrumentation_scope=InstrumentationScope("s"),
)


def _span_with(attributes: str = "{}", events: str = "[]") -> bytes:
    """A plain span's record, its attributes or events text replaced."""
    values = unpack("span", encode_span(_PLAIN_SPAN, 7, FTRACE_MAX_PAYLOAD)[0])
    values["attributes"], values["events"] = attributes, events
    fields = schema.SPAN.fields
    fixed = [values[f.name] for f in fields if not f.is_text]
    fixed = [v.encode() if isinstance(v, str) else v for v in fixed]
    texts = [values[f.name].encode() for f in fields if f.is_text]
    return record(IDS["span"], schema.SPAN.pack(fixed, texts))  # any size: a perf sample's


@pytest.mark.parametrize(
    ("attributes", "events"),
    [
        ("{" + ",".join(f'"k{n}":{n}' for n in range(129)) + "}", "[]"),  # past J_PAIRS
        ('{"a":' + "[" * 17 + "1" + "]" * 17 + "}", "[]"),  # past J_DEPTH
        ("{}", "[" + ",".join(["0"] * 5000) + "]"),  # past J_NODES (a perf sample's size)
        ('{"a":1,"a":2}', "[]"),  # a repeated key: json keeps the last at the first's place
        ('{"a":1,"a\\/":2,"a/":3}', "[]"),  # the same key once its escape is decoded
    ],
)
def test_what_passes_the_cores_bounds_is_handed_back_and_comes_out_the_same(attributes, events):
    """Each bound of the core's per-record work (pairs in an object, nesting, nodes in a
    text) hands the record to the Python path rather than working on: the same output."""
    chunks = _both([(1, _span_with(attributes, events))])
    assert chunks.handed_back == 1


def test_within_the_bounds_the_core_keeps_the_record():
    attributes = "{" + ",".join(f'"k{n}":{n}' for n in range(128)) + "}"
    nested = '{"a":' + "[" * 15 + "1" + "]" * 15 + "}"
    for text in (attributes, nested):
        assert _both(_pages([_span_with(text)])).handed_back == 0
