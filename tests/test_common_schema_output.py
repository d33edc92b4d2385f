# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Our exporters' EventHeader output without a kernel: spans and logs made by the SDK,
encoded as Common Schema 4.0 events, decoded by the reader's EventHeader decoder and mapped
by its Common Schema mapping, each field compared with the SDK's own (less what Common
Schema cannot carry: docs/common-schema.md). Then hostile values: every record fits, reads
back, and says it was cut."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from opentelemetry_exporter_userevents._export import eventheader_encoder as eh
from opentelemetry_exporter_userevents._export.common_schema_envelope import (
    CloudRole,
    level,
    rfc3339,
)
from opentelemetry_exporter_userevents._export.common_schema_log import encode_log
from opentelemetry_exporter_userevents._export.common_schema_span import WELL_KNOWN, encode_span
from opentelemetry_exporter_userevents._export.log_encoder import severity_number
from opentelemetry_exporter_userevents.reader.decode.common_schema import (
    CommonSchemaRecord,
    map_event,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader import decode_event
from opentelemetry_exporter_userevents.record.flags import TRUNCATION_MARK
from tests.support.span_fixtures import RESOURCE, make_logs, make_spans

CS_NAMES = {
    "db.system.name",
    "db.namespace",
    "db.query.text",
    "http.request.method",
    "url.full",
    "http.response.status_code",
    "messaging.system",
    "messaging.destination.name",
    "messaging.url",
    "rpc.system.name",
    "rpc.response.status_code",
}


def read_span(data: bytes) -> CommonSchemaRecord:
    return map_event(decode_event("otel_L4K1", data), 1, 2, "user_events:otel_L4K1")


def read_log(data: bytes, number: int) -> CommonSchemaRecord:
    tracepoint = f"otel_L{level(number)}K1"
    return map_event(decode_event(tracepoint, data), 1, 2, "user_events:" + tracepoint)


def as_common_schema(value: Any) -> Any:
    """An attribute value as Rust writes it and the reader reads it back."""
    if isinstance(value, str):  # UTF-8 holds no surrogate: a pair joins, a lone one is U+FFFD
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < 1 << 63 else str(value)
    return ""


def no_nan(value: Any) -> Any:
    """NaN as text, so that a NaN compares equal to itself."""
    if isinstance(value, dict):
        return {k: no_nan(v) for k, v in value.items()}
    return "NaN" if isinstance(value, float) and value != value else value


def test_the_header_and_layout_are_rusts() -> None:
    """Byte for byte the start of what eventheader_dynamic writes for Rust's span: flags
    (pointer64, little-endian, extension), version 0, id 0, tag 0, opcode info, level 4,
    a metadata extension, the event name ``Span``, then ``__csver__`` u32 unsigned."""
    span = next(s for s in make_spans() if s.attributes)
    data, _ = encode_span(span, 0, 4064, CloudRole())
    flags, version, event_id, tag, opcode, lvl, size, kind = struct.unpack_from("<BBHHBBHH", data)
    assert (flags, version, event_id, tag, opcode, lvl, kind) == (7, 0, 0, 0, 0, 4, 1)
    meta = data[12 : 12 + size]
    assert meta.startswith(b"Span\0__csver__\0\x84\x01PartA\0\x81")
    event = decode_event("otel_L4K1", data)
    assert [f.name for f in event.fields] == ["__csver__", "PartA", "PartB", "PartC"]
    part_b = [f.name for f in event.fields[2].value]  # type: ignore[union-attr]
    assert part_b[:5] == ["_typeName", "name", "startTime", "success", "kind"]


def test_spans_read_back_as_the_sdk_wrote_them() -> None:
    role = CloudRole()
    for span in make_spans():
        data, truncated = encode_span(span, 0, 4064, role)
        assert not truncated
        result = read_span(data)
        record = result.record
        assert result.resource == {"service.name": "checkout"}
        assert result.dropped == ()
        assert record.name == span.name
        assert record.trace_id == span.context.trace_id
        assert record.span_id == span.context.span_id
        assert record.parent_span_id == span.parent.span_id  # both have a parent
        assert record.kind == span.kind.value
        assert record.start_time_ns == span.start_time
        assert record.end_time_ns == span.end_time
        error = span.status.status_code is StatusCode.ERROR
        assert record.status_code == (2 if error else 0)
        assert record.status_description == (span.status.description if error else "")
        assert [(link.trace_id, link.span_id) for link in record.links] == [
            (link.context.trace_id, link.context.span_id) for link in span.links
        ]
        expected = {k: as_common_schema(v) for k, v in span.attributes.items()}
        assert no_nan(record.attributes) == no_nan(expected)


def test_a_root_span_has_no_parent_and_well_known_attributes_go_to_part_b() -> None:
    attributes = {name: f"v-{name}" for name in WELL_KNOWN}
    attributes["http.response.status_code"] = 503  # type: ignore[assignment]
    span = _one_span(attributes, status=StatusCode.ERROR)
    data, _ = encode_span(span, 0, 4064, CloudRole())
    event = decode_event("otel_L4K1", data)
    assert [f.name for f in event.fields] == ["__csver__", "PartA", "PartB"]  # no PartC
    part_b = {f.name for f in event.fields[2].value}  # type: ignore[union-attr]
    assert "parentId" not in part_b
    assert "statusMessage" not in part_b  # Rust leaves it out beside httpStatusCode
    record = read_span(data).record
    assert record.parent_span_id is None
    assert set(record.attributes) == CS_NAMES
    assert record.attributes["http.response.status_code"] == 503


def test_logs_read_back_as_the_sdk_wrote_them() -> None:
    role = CloudRole()
    for readable in make_logs():
        log = readable.log_record
        number = severity_number(readable)
        data, truncated = encode_log(readable, 0, 4064, role)
        assert not truncated
        assert data[7] == level(number)  # the header's level byte
        record = read_log(data, number).record
        assert record.time_ns == (log.timestamp or log.observed_timestamp)
        assert record.trace_id == (log.trace_id or 0)
        assert record.span_id == (log.span_id or 0 if log.trace_id else 0)
        assert record.severity_number == number
        assert record.severity_text == log.severity_text
        assert record.event_name == log.event_name
        expected_body = None if log.body is None else as_common_schema(log.body)
        assert no_nan(record.body) == no_nan(expected_body)
        expected = {k: as_common_schema(v) for k, v in log.attributes.items()}
        assert record.attributes == expected


def test_levels_follow_rusts_severity_mapping() -> None:
    assert [level(n) for n in range(25)] == [4] + [5] * 8 + [4] * 4 + [3] * 4 + [2] * 4 + [1] * 4


def test_an_integer_event_id_goes_to_part_b() -> None:
    readable = _one_log({"event_id": 7, "k": "v"})
    data, _ = encode_log(readable, 0, 4064, CloudRole())
    event = decode_event("otel_L4K1", data)
    assert [f.name for f in event.fields] == ["__csver__", "PartA", "PartC", "PartB"]
    assert read_log(data, 0).record.attributes == {"event_id": 7, "k": "v"}


def test_times_are_chronos_auto_si() -> None:
    assert rfc3339(1752228001_123456789) == b"2025-07-11T10:00:01.123456789Z"
    assert rfc3339(1752228001_123456000) == b"2025-07-11T10:00:01.123456Z"
    assert rfc3339(1752228001_500000000) == b"2025-07-11T10:00:01.500Z"
    assert rfc3339(1752228001_000000000) == b"2025-07-11T10:00:01Z"
    with pytest.raises(ValueError):
        rfc3339(-1)


# --- hostile values ------------------------------------------------------------------


@pytest.mark.parametrize("max_size", [1024, 4064, 8184])
def test_a_huge_attribute_is_cut_to_fit_and_marked(max_size: int) -> None:
    span = _one_span({"huge": "x" * 1_000_000, "small": "s"}, name="n" * 100_000)
    data, truncated = encode_span(span, 0, max_size, CloudRole())
    assert truncated
    assert len(data) <= max_size
    record = read_span(data).record
    assert record.name.endswith(TRUNCATION_MARK)
    assert record.attributes["small"] == "s"
    assert record.attributes.get("huge", TRUNCATION_MARK).endswith(TRUNCATION_MARK)


def test_a_huge_log_body_is_cut_last() -> None:
    readable = _one_log({f"a{i}": "y" * 200 for i in range(40)}, body="b" * 100_000)
    data, truncated = encode_log(readable, 0, 4064, CloudRole())
    assert truncated and len(data) <= 4064
    record = read_log(data, 0).record
    assert record.body.endswith(TRUNCATION_MARK)  # type: ignore[union-attr]
    assert len(record.body) > 4064 // 8  # type: ignore[arg-type]


@pytest.mark.parametrize("max_size", [1024, 4064, 8184])
def test_a_long_log_body_is_cut_before_a_small_attribute_is_left_out(max_size: int) -> None:
    """The body is cut (to no less than an eighth of the record) before PartC loses an
    attribute: a one-int attribute was lost for any body over the record's size."""
    readable = _one_log({"order.id": 42, "retry": True}, body="b" * 100_000)
    data, truncated = encode_log(readable, 0, max_size, CloudRole())
    assert truncated and len(data) <= max_size
    record = read_log(data, 0).record
    assert record.attributes == {"order.id": 42, "retry": True}
    assert record.body.endswith(TRUNCATION_MARK)  # type: ignore[union-attr]
    assert len(record.body) > max_size // 2  # type: ignore[arg-type]


def test_many_attributes_are_bounded_by_the_struct_field_count() -> None:
    span = _one_span({f"k{i}": i for i in range(1000)}, limit=2000)
    data, truncated = encode_span(span, 0, 8184, CloudRole())
    assert truncated and len(data) <= 8184
    assert len(read_span(data).record.attributes) <= eh.MAX_STRUCT_FIELDS


def test_names_eventheader_cannot_hold_are_left_out_and_counted() -> None:
    span = _one_span({"a;b": 1, "nul\0": 2, "ok": 3})
    data, truncated = encode_span(span, 0, 4064, CloudRole())
    assert truncated
    assert read_span(data).record.attributes == {"ok": 3}


def test_unpaired_surrogates_and_deep_values_read_back() -> None:
    deep: Any = "leaf"
    for _ in range(500):
        deep = {"d": deep}
    readable = _one_log({"s\ud800": "v\udfff", "deep": deep}, body="\ud800body", event="e\udc00")
    data, _ = encode_log(readable, 0, 4064, CloudRole())
    record = read_log(data, 0).record
    assert record.body == "\ufffdbody"
    assert record.event_name == "e\ufffd"
    assert record.attributes == {"s\ufffd": "v\ufffd", "deep": ""}


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.text(max_size=40), st.text(max_size=3000) | st.integers(), max_size=60),
    st.text(max_size=5000),
    st.integers(1024, 8184),
)
def test_every_span_fits_and_reads_back(attributes: dict[str, Any], name: str, size: int) -> None:
    span = _one_span(attributes, name=name, limit=200)
    data, _ = encode_span(span, 0, size, CloudRole())
    assert len(data) <= size
    read_span(data)  # no exception: a well-formed event


def _one_span(
    attributes: dict[str, Any],
    name: str = "op",
    status: StatusCode = StatusCode.UNSET,
    limit: int = 128,
) -> Any:
    from opentelemetry.sdk.trace import SpanLimits  # noqa: PLC0415

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE, span_limits=SpanLimits(max_attributes=limit))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span(name, attributes=attributes) as span:
        if status is StatusCode.ERROR:
            from opentelemetry.trace import Status  # noqa: PLC0415

            span.set_status(Status(status, "down"))
    provider.shutdown()
    return memory.get_finished_spans()[0]


def _one_log(attributes: dict[str, Any], body: Any = "b", event: str | None = None) -> Any:
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource({}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    provider.get_logger("l").emit(body=body, attributes=attributes, event_name=event)
    provider.shutdown()
    return memory.get_finished_logs()[0]


def test_the_name_cache_is_bounded_under_hostile_names() -> None:
    for i in range(3 * eh.MAX_CACHED_NAMES):
        assert eh.cached_name(f"k{i}") == f"k{i}\0".encode()
        assert len(eh._names) <= eh.MAX_CACHED_NAMES
    assert eh.cached_name(["unhashable"]) is None
    assert eh.cached_name(7) is None
    assert eh.cached_name("a;b") is None and eh.cached_name("ok") == b"ok\0"


def test_links_are_left_out_from_the_end_to_fit() -> None:
    from opentelemetry.sdk.trace import SpanLimits  # noqa: PLC0415
    from opentelemetry.trace import Link, SpanContext  # noqa: PLC0415

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE, span_limits=SpanLimits(max_links=128))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    links = [Link(SpanContext(i + 1, i + 1, is_remote=False)) for i in range(128)]
    provider.get_tracer("t").start_span("linked", links=links).end()
    provider.shutdown()
    (span,) = memory.get_finished_spans()
    data, truncated = encode_span(span, 0, 1024, CloudRole())
    assert truncated and len(data) <= 1024
    kept = read_span(data).record.links
    assert 0 < len(kept) < 128
    assert [link.trace_id for link in kept] == list(range(1, len(kept) + 1))  # the first ones
