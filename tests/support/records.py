# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Checks that a decoded record carries exactly what the SDK handed to the exporter."""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

from opentelemetry_exporter_userevents.abi import EventFormat, FormatField
from opentelemetry_exporter_userevents.record import anyvalue, flags
from opentelemetry_exporter_userevents.record.plain_text import decode_plain
from opentelemetry_exporter_userevents.record.schema import LOG, SPAN, Schema

HEADER = b"\x01\x00\x00\x00\x2a\x00\x00\x00"  # common_type, flags, preempt, pid


def format_of(schema: Schema, name: str, event_id: int = 1) -> EventFormat:
    """The format file the kernel would show for ``schema`` (fields packed from offset 8)."""
    fields, offset = [], 8
    for field in schema.fields:
        size = schema_size(field)
        fields.append(FormatField(field.name, field.type, offset, size, False, "[" in field.type))
        offset += size
    return EventFormat(name, event_id, (), tuple(fields), "")


def schema_size(field) -> int:
    return struct.calcsize("<" + field.struct_code)


def plain(value: Any) -> Any:
    """An SDK value as the value encoding decodes it: tuples as lists, mappings as dicts."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def check_span(values: dict[str, Any], span: Any, resource_id: int) -> None:
    """Every field of an ``otel_span`` record against the span (no truncation)."""
    context, parent = span.context, span.parent
    assert values["trace_id"] == f"{context.trace_id:032x}"
    assert values["span_id"] == f"{context.span_id:016x}"
    assert values["parent_span_id"] == (f"{parent.span_id:016x}" if parent else "0" * 16)
    assert values["parent_flags"] == (1 if parent else 0) | (
        2 if parent and parent.is_remote else 0
    )
    assert values["trace_flags"] == int(context.trace_flags)
    assert decode_plain(values["trace_state"]) == context.trace_state.to_header()
    assert decode_plain(values["name"]) == span.name
    assert values["kind"] == span.kind.value
    assert values["start_time_ns"] == span.start_time
    assert values["end_time_ns"] == span.end_time
    assert values["duration_ns"] == span.end_time - span.start_time
    assert values["status_code"] == span.status.status_code.value
    assert decode_plain(values["status_description"]) == (span.status.description or "")
    assert same(anyvalue.decode(values["attributes"]), plain(span.attributes))
    events = anyvalue.decode(values["events"])
    assert len(events) == len(span.events)
    for event, original in zip(events, span.events, strict=True):
        assert event["name"] == original.name and event["time_ns"] == original.timestamp
        assert same(event["attributes"], plain(original.attributes))
        assert event["dropped"] == original.dropped_attributes
    links = anyvalue.decode(values["links"])
    assert len(links) == len(span.links)
    for link, original in zip(links, span.links, strict=True):
        assert link["trace_id"] == f"{original.context.trace_id:032x}"
        assert link["span_id"] == f"{original.context.span_id:016x}"
        assert link["trace_flags"] == int(original.context.trace_flags)
        assert link["trace_state"] == original.context.trace_state.to_header()
        assert link["is_remote"] == original.context.is_remote
        assert same(link["attributes"], plain(original.attributes))
    assert values["dropped_attributes"] == span.dropped_attributes
    assert values["dropped_events"] == span.dropped_events
    assert values["dropped_links"] == span.dropped_links
    check_scope(values["scope"], span.instrumentation_scope)
    assert values["resource_id"] == resource_id
    assert values["truncated"] == 0


def check_scope(text: str, scope: Any) -> None:
    decoded = anyvalue.decode(text)
    assert decoded["name"] == scope.name and decoded["version"] == scope.version
    assert decoded["schema_url"] == scope.schema_url
    assert same(decoded["attributes"], plain(scope.attributes or {}))


def check_log(values: dict[str, Any], readable: Any, resource_id: int) -> None:
    """Every field of an ``otel_log_*`` record against the log record (no truncation)."""
    record = readable.log_record
    assert values["time_ns"] == (record.timestamp or 0)
    assert values["observed_time_ns"] == record.observed_timestamp
    assert values["trace_id"] == f"{record.trace_id or 0:032x}"
    assert values["span_id"] == f"{record.span_id or 0:016x}"
    assert values["trace_flags"] == int(record.trace_flags or 0)
    number = record.severity_number.value if record.severity_number else 0
    assert values["severity_number"] == number
    assert decode_plain(values["severity_text"]) == (record.severity_text or "")
    assert bool(values["flags"] & 1) == (record.severity_text is not None)
    assert decode_plain(values["event_name"]) == (record.event_name or "")
    assert bool(values["flags"] & 2) == (record.event_name is not None)
    assert bool(values["flags"] & 4) == (record.body is not None)
    assert same(anyvalue.decode(values["body"]), plain(record.body))
    assert same(anyvalue.decode(values["attributes"]), plain(record.attributes or {}))
    assert values["dropped_attributes"] == readable.dropped_attributes
    check_scope(values["scope"], readable.instrumentation_scope)
    assert values["resource_id"] == resource_id
    assert values["truncated"] == 0


def fields_the_kernel_accepts(payload: bytes, record_schema: Schema) -> None:
    """What the kernel checks of each ``__rel_loc char[]`` field (it refuses the write with
    EFAULT otherwise), and what readers rely on: inside the record, NUL-terminated, no NUL
    before the end, strict UTF-8."""
    first_loc = record_schema.header_size - 4 * len(record_schema.texts)
    for i in range(len(record_schema.texts)):
        at = first_loc + 4 * i
        (loc,) = struct.unpack_from("<I", payload, at)
        start, size = at + 4 + (loc & 0xFFFF), loc >> 16
        text = payload[start : start + size]
        assert size >= 1 and start + size <= len(payload)
        assert text.index(b"\0") == size - 1, "NUL-terminated, with no NUL inside"
        text[:-1].decode("utf-8")


def unpack_span(payload: bytes) -> dict[str, Any]:
    """A span payload as the kernel would store it, checked and decoded."""
    fields_the_kernel_accepts(payload, SPAN)
    return SPAN.unpack(HEADER + payload, format_of(SPAN, "otel_span.0"))


def unpack_log(payload: bytes) -> dict[str, Any]:
    """A log payload as the kernel would store it, checked and decoded."""
    fields_the_kernel_accepts(payload, LOG)
    return LOG.unpack(HEADER + payload, format_of(LOG, "otel_log_info.0"))


def _check_kept(kept: list, originals: list, dropped: int, original_dropped: int) -> None:
    assert len(kept) <= len(originals)
    assert dropped == original_dropped + len(originals) - len(kept)


def _check_cut_text(text: str, original: str) -> None:
    assert text == original or text.endswith(flags.TRUNCATION_MARK), (text, original)


def check_cut_span(values: dict[str, Any], span: Any) -> None:
    """A span cut to fit: what is kept is exact, what is cut is counted or marked (for
    spans whose attribute values are all encodable)."""
    assert values["truncated"] != 0
    assert values["trace_id"] == f"{span.context.trace_id:032x}"
    assert values["start_time_ns"] == span.start_time and values["end_time_ns"] == span.end_time
    attributes = anyvalue.decode(values["attributes"])
    for key, value in attributes.items():
        assert same(value, plain(span.attributes[key]))
    _check_kept(list(attributes), list(span.attributes), values["dropped_attributes"],
                span.dropped_attributes)  # fmt: skip
    events = anyvalue.decode(values["events"])
    for event, original in zip(events, span.events, strict=False):
        assert event["name"] == original.name and event["time_ns"] == original.timestamp
    _check_kept(events, list(span.events), values["dropped_events"], span.dropped_events)
    links = anyvalue.decode(values["links"])
    _check_kept(links, list(span.links), values["dropped_links"], span.dropped_links)
    _check_cut_text(decode_plain(values["name"]), span.name)
    _check_cut_text(decode_plain(values["status_description"]), span.status.description or "")


def check_cut_log(values: dict[str, Any], readable: Any) -> None:
    """A log record cut to fit: kept attributes exact and the rest counted; a cut body is a
    string ending with the marker."""
    record = readable.log_record
    assert values["truncated"] != 0
    body = anyvalue.decode(values["body"])
    if values["truncated"] & flags.TRUNCATED_TEXT and not same(body, plain(record.body)):
        assert isinstance(body, str) and body.endswith(flags.TRUNCATION_MARK)
    attributes = anyvalue.decode(values["attributes"])
    for key, value in attributes.items():
        assert same(value, plain(record.attributes[key]))
    _check_kept(list(attributes), list(record.attributes or {}), values["dropped_attributes"],
                readable.dropped_attributes)  # fmt: skip
