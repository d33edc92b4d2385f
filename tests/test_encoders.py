# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Schemas and record encoding without a kernel: golden formats, field-by-field round trips,
and records cut to fit."""

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, TraceFlags
from opentelemetry.trace.span import TraceState

from opentelemetry_exporter_userevents._export import span_encoder as spans
from opentelemetry_exporter_userevents._export.log_encoder import encode_log
from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.record import anyvalue, flags, schema, tracepoints
from opentelemetry_exporter_userevents.record.plain_text import decode_plain
from opentelemetry_exporter_userevents.record.resource_id import hash_resource
from opentelemetry_exporter_userevents.record.schema import LOG, RESOURCE, SPAN
from tests.support.records import check_log, check_span, format_of
from tests.support.span_fixtures import make_logs, make_spans
from tests.test_anyvalue import keys, scalars, texts

HEADER = b"\x01\x00\x00\x00\x2a\x00\x00\x00"  # common_type, flags, preempt, pid


def record(payload: bytes) -> bytes:
    return HEADER + payload


def test_golden_commands():
    """Changing these strings registers new tracepoints: do it only with a schema change."""
    assert SPAN.command() == (
        "otel_span u64 start_time_ns; u64 end_time_ns; u64 duration_ns; u64 resource_id; "
        "char[32] trace_id; char[16] span_id; char[16] parent_span_id; u32 dropped_attributes; "
        "u32 dropped_events; u32 dropped_links; u8 kind; u8 status_code; u8 trace_flags; "
        "u8 parent_flags; u8 truncated; __rel_loc char[] name; __rel_loc char[] "
        "status_description; __rel_loc char[] trace_state; __rel_loc char[] attributes; "
        "__rel_loc char[] events; __rel_loc char[] links; __rel_loc char[] scope"
    )
    assert LOG.command("otel_log_info") == (
        "otel_log_info u64 time_ns; u64 observed_time_ns; u64 resource_id; char[32] trace_id; "
        "char[16] span_id; u32 dropped_attributes; u8 severity_number; u8 trace_flags; u8 flags; "
        "u8 truncated; __rel_loc char[] severity_text; __rel_loc char[] event_name; "
        "__rel_loc char[] body; __rel_loc char[] attributes; __rel_loc char[] scope"
    )
    assert RESOURCE.command() == (
        "otel_resource u64 resource_id; u32 interval_ms; __rel_loc char[] attributes; "
        "__rel_loc char[] schema_url"
    )
    for s in (SPAN, LOG, RESOURCE):
        assert len(s.command(f"{s.name}_{'x' * 32}").encode()) <= 511


def test_fields_are_documented_and_texts_come_last():
    for s in (SPAN, LOG, RESOURCE):
        assert all(f.doc for f in s.fields)
        kinds = [f.is_text for f in s.fields]
        assert kinds == sorted(kinds)
    with pytest.raises(ValueError):
        schema.Schema(
            "bad", [schema.Field("t", schema.TEXT, "x"), schema.Field("n", "u8", "x")], ""
        )


def test_pack_places_each_text_where_its_rel_loc_points():
    payload = RESOURCE.pack((7, 1000), (b"{}", b"https://s"))
    values = RESOURCE.unpack(record(payload), format_of(RESOURCE, "otel_resource"))

    assert values == {"resource_id": 7, "interval_ms": 1000, "attributes": "{}",
                      "schema_url": "https://s"}  # fmt: skip
    (loc,) = struct.unpack_from("<I", payload, 12)
    assert loc >> 16 == 3 and payload[16 + (loc & 0xFFFF) : 16 + (loc & 0xFFFF) + 3] == b"{}\0"


def test_unpack_refuses_a_record_that_does_not_fit():
    payload = RESOURCE.pack((7, 1000), (b"{}", b""))

    with pytest.raises(ValueError):
        RESOURCE.unpack(record(payload)[:10], format_of(RESOURCE, "otel_resource"))
    with pytest.raises(ValueError):
        RESOURCE.unpack(record(payload)[:-3], format_of(RESOURCE, "otel_resource"))


def test_span_record_carries_every_field():
    spans = make_spans()

    for span in spans:
        payload, truncated = encode_span(span, 99, FTRACE_MAX_PAYLOAD)
        values = SPAN.unpack(record(payload), format_of(SPAN, "otel_span.0"))
        check_span(values, span, 99)
        assert not truncated
    assert {span.kind.value for span in spans} == {1, 2}


def test_log_record_carries_every_field():
    logs = make_logs()
    assert len(logs) == 25

    for readable in logs:
        payload, truncated = encode_log(readable, 5, FTRACE_MAX_PAYLOAD)
        check_log(LOG.unpack(record(payload), format_of(LOG, "otel_log_info.0")), readable, 5)
        assert not truncated
    assert logs[-1].log_record.timestamp is None


@pytest.mark.parametrize("number", [0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25])
def test_severity_classes(number):
    expected = {0: "info", 25: "info"}.get(number) or tracepoints.SEVERITY_CLASSES[
        (number - 1) // 4
    ]
    assert tracepoints.severity_class(number) == expected


def test_resource_id_is_stable_and_content_derived():
    a = hash_resource(b'{"service.name":"a"}', b"")
    assert a == hash_resource(b'{"service.name":"a"}', b"")
    assert a != hash_resource(b'{"service.name":"b"}', b"")
    assert 0 <= a < 2**64


def _big_span():
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("n" * 3000) as span:
        for i in range(40):
            span.set_attribute(f"attr{i}", "v" * 200)
        for i in range(20):
            span.add_event(f"event{i}", {"payload": "e" * 300})
    return memory.get_finished_spans()[0]


@pytest.mark.parametrize("limit", [1024, 4064, 8184])
def test_oversized_span_is_cut_to_fit_with_markers_and_counts(limit):
    span = _big_span()

    payload, truncated = encode_span(span, 1, limit)
    values = SPAN.unpack(record(payload), format_of(SPAN, "otel_span.0"))

    assert truncated and len(payload) <= limit
    events = anyvalue.decode(values["events"])
    attributes = anyvalue.decode(values["attributes"])
    assert values["dropped_events"] == 20 - len(events)
    assert values["dropped_attributes"] == 40 - len(attributes)
    assert values["truncated"] & flags.TRUNCATED_EVENTS
    for key, value in attributes.items():  # what is kept is kept whole
        assert span.attributes[key] == value
    name = decode_plain(values["name"])
    if values["truncated"] & flags.TRUNCATED_TEXT:
        assert name.endswith(flags.TRUNCATION_MARK)
        assert span.name.startswith(name[: -len(flags.TRUNCATION_MARK)])
    else:
        assert name == span.name


def test_oversized_log_body_becomes_a_marked_prefix():
    logs = make_logs()
    readable = logs[0]
    readable.log_record.body = {"big": "x\x00" * 5000}

    payload, truncated = encode_log(readable, 1, 4064)
    values = LOG.unpack(record(payload), format_of(LOG, "otel_log_trace.0"))

    assert truncated and len(payload) <= 4064
    body = anyvalue.decode(values["body"])
    assert isinstance(body, str) and body.endswith(flags.TRUNCATION_MARK)
    assert values["truncated"] & flags.TRUNCATED_TEXT


def test_unencodable_attribute_is_dropped_and_counted():
    span = make_spans()[0]
    span._attributes = dict(span.attributes, bad={1, 2})  # not an AnyValue

    payload, _ = encode_span(span, 1, 4064)
    values = SPAN.unpack(record(payload), format_of(SPAN, "otel_span.0"))

    assert "bad" not in anyvalue.decode(values["attributes"])
    assert values["dropped_attributes"] == span.dropped_attributes + 1


def test_schema_document_lists_every_field():
    with open(Path(__file__).parent.parent / "docs" / "schema.md", encoding="utf-8") as f:
        document = f.read()
    for s in (SPAN, LOG, RESOURCE, schema.METRIC_NUMBER, schema.METRIC_HISTOGRAM, schema.ANNOUNCE):
        assert s.command() in document
        for field in s.fields:
            assert f"| `{field.name}` | `{field.type}` | {field.doc} |" in document


def test_unencodable_event_attribute_is_dropped_and_counted_on_the_event():
    span = make_spans()[0]
    event = span.events[0]
    original = dict(event.attributes)
    event._attributes = dict(original, bad=object())

    payload, _ = encode_span(span, 1, 4064)
    values = SPAN.unpack(record(payload), format_of(SPAN, "otel_span.0"))

    (decoded,) = anyvalue.decode(values["events"])
    assert "bad" not in decoded["attributes"]
    assert decoded["attributes"] == original
    assert decoded["dropped"] == event.dropped_attributes + 1


_tracer_memory = InMemorySpanExporter()
_tracer_provider = TracerProvider()
_tracer_provider.add_span_processor(SimpleSpanProcessor(_tracer_memory))
flat_or_not = st.dictionaries(keys.filter(bool), scalars | st.tuples(scalars, scalars), max_size=5)


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(st.tuples(texts, flat_or_not, st.integers(0, 2**64 - 1)), max_size=4),
    links=st.lists(st.tuples(flat_or_not, st.booleans()), max_size=3),
)
def test_fast_event_and_link_texts_match_the_general_path(events, links):
    """The fast path builds events and links text directly; the general path encodes the
    dicts that docs/schema.md describes. Both must write the same bytes."""
    _tracer_memory.clear()
    span_links = [
        Link(SpanContext(7, 9, remote, TraceFlags(1), TraceState([("k", "v")])), attributes)
        for attributes, remote in links
    ]
    with _tracer_provider.get_tracer("t").start_as_current_span("s", links=span_links) as span:
        for name, attributes, timestamp in events:
            span.add_event(name, attributes, timestamp=timestamp)
    (finished,) = _tracer_memory.get_finished_spans()

    for items, fast, general in (
        (finished.events, spans._event_text, spans._event),
        (finished.links, spans._link_text, spans._link),
    ):
        text, parts = spans._encode_list(items, fast, general)
        assert text == anyvalue.encode([general(item) for item in items]).encode()
        assert b"[" + b",".join(parts) + b"]" == text


def test_fast_path_covers_plain_events_and_links():
    _tracer_memory.clear()
    linked = SpanContext(7, 9, True, TraceFlags(1), TraceState([("k", "v")]))
    tracer = _tracer_provider.get_tracer("t")
    with tracer.start_as_current_span("s", links=[Link(linked, {"a": 1})]) as span:
        span.add_event("héllo", {"key": "user:1", "n": 2.5, "ok": True, "none": None})
    (finished,) = _tracer_memory.get_finished_spans()

    assert spans._event_text(finished.events[0]) == (
        f'{{"name":"héllo","time_ns":{finished.events[0].timestamp},'
        '"attributes":{"key":"user:1","n":2.5,"ok":true,"none":null},"dropped":0}'
    )
    assert spans._link_text(finished.links[0]) == (
        '{"trace_id":"00000000000000000000000000000007","span_id":"0000000000000009",'
        '"trace_flags":1,"trace_state":"k=v","is_remote":true,"attributes":{"a":1},"dropped":0}'
    )


def test_cutting_to_fit_keeps_unencodable_attributes_out():
    span = _big_span()
    span._attributes = dict(span.attributes, bad={1, 2})

    payload, truncated = encode_span(span, 1, 2048)
    values = SPAN.unpack(record(payload), format_of(SPAN, "otel_span.0"))

    attributes = anyvalue.decode(values["attributes"])
    assert truncated and "bad" not in attributes
    assert values["dropped_attributes"] == 41 - len(attributes)
