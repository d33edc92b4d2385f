# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OTLP protobuf straight from checked records: the ``ExportTraceServiceRequest`` and
``ExportLogsServiceRequest`` bytes an OTLP exporter sends (the OTLP encoder's message,
``SerializeToString``) for the same records as SDK objects, written in the protobuf wire
format by hand, without the SDK objects, the encoder or protobuf's message classes.

It follows :mod:`.otlp_json_direct` value for value (what the SDK keeps, what the encoder
leaves out or refuses), in protobuf's terms: fields in field-number order, as protobuf
serializes them; a field of proto3's implicit presence left out when it holds its default
(0, ``""``, no bytes), a message field present whenever the encoder sets it, even empty
(``status``, a log's ``body``, a scope, a resource, a ``KeyValue``'s value), and a
``oneof`` member always (``int_value`` 0, ``bool_value`` false, an empty string); 64-bit
times as ``fixed64``, ``flags`` as ``fixed32``, negative integers in ten bytes; ids as 16
and 8 big-endian bytes (a log's left out when 0, a span's never).

Records are grouped by resource, then scope, as the encoder's dicts group them
(:mod:`.grouping`, shared with the JSON encoder). A record the encoder would refuse (a name
with a lone surrogate, a log body integer beyond 64 bits) is left out and counted; an
attribute it cannot carry is left out, as the encoder leaves it out.
``tests/reader/outputs/test_otlp_proto_direct.py`` proves the bytes equal to the installed
encoder's over every value kind.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents.abi.binary import S64_MAX, S64_MIN
from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedEvent,
    CheckedLink,
    CheckedLog,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord
from opentelemetry_exporter_userevents.reader.join.joined_record import JoinedRecord
from opentelemetry_exporter_userevents.reader.outputs.exporters.grouping import (
    EncodedCache,
    Unrepresentable,
    grouped,
)
from opentelemetry_exporter_userevents.reader.outputs.exporters.otlp_span_flags import (
    CONTEXT_HAS_IS_REMOTE_MASK,
    CONTEXT_IS_REMOTE_MASK,
)
from opentelemetry_exporter_userevents.record.tracepoints import LOG_KIND, SPAN_KIND

_U64_MASK = (1 << 64) - 1
_BYTE = [bytes((n,)) for n in range(128)]
_fixed64 = struct.Struct("<Q").pack
_fixed32 = struct.Struct("<I").pack
_double = struct.Struct("<d").pack

# Tags: (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
# Span
_SPAN_TRACE_STATE = b"\x1a"
_SPAN_PARENT = b"\x22\x08"
_SPAN_NAME = b"\x2a"
_SPAN_KIND = (b"\x30\x01", b"\x30\x02", b"\x30\x03", b"\x30\x04", b"\x30\x05")
_SPAN_START = b"\x39"
_SPAN_END = b"\x41"
_SPAN_ATTRIBUTE = b"\x4a"
_SPAN_DROPPED_ATTRIBUTES = b"\x50"
_SPAN_EVENT = b"\x5a"
_SPAN_DROPPED_EVENTS = b"\x60"
_SPAN_LINK = b"\x6a"
_SPAN_DROPPED_LINKS = b"\x70"
_SPAN_STATUS = b"\x7a"
_SPAN_FLAGS = b"\x85\x01"  # field 16
_STATUS_UNSET = b"\x7a\x00"
_STATUS_OK = b"\x7a\x02\x18\x01"
_STATUS_ERROR = b"\x7a\x02\x18\x02"
# Span.Event, Span.Link
_EVENT_TIME = b"\x09"
_EVENT_NAME = b"\x12"
_EVENT_ATTRIBUTE = b"\x1a"
_EVENT_DROPPED = b"\x20"
_LINK_ATTRIBUTE = b"\x22"
_LINK_DROPPED = b"\x28"
_LINK_FLAGS = (
    b"\x35" + _fixed32(CONTEXT_HAS_IS_REMOTE_MASK),
    b"\x35" + _fixed32(CONTEXT_HAS_IS_REMOTE_MASK | CONTEXT_IS_REMOTE_MASK),
)
# LogRecord
_LOG_TIME = b"\x09"
_LOG_SEVERITY_NUMBER = b"\x10"
_LOG_SEVERITY_TEXT = b"\x1a"
_LOG_BODY = b"\x2a"
_LOG_ATTRIBUTE = b"\x32"
_LOG_DROPPED = b"\x38"
_LOG_FLAGS = b"\x45"
_LOG_TRACE_ID = b"\x4a\x10"
_LOG_SPAN_ID = b"\x52\x08"
_LOG_OBSERVED = b"\x59"
_LOG_EVENT_NAME = b"\x62"
# Resource, InstrumentationScope, ResourceSpans/Logs, ScopeSpans/Logs, the requests: field 1
# is the resource (scope, request item), 2 the scopes (records), 3 the schema URL.
_FIELD_1 = b"\x0a"
_FIELD_2 = b"\x12"
_FIELD_3 = b"\x1a"
# KeyValue, AnyValue
_KEY = b"\x0a"
_VALUE = b"\x12"
_STRING = b"\x0a"
_TRUE = b"\x10\x01"
_FALSE = b"\x10\x00"
_INT = b"\x18"
_DOUBLE = b"\x21"
_ARRAY = b"\x2a"
_KVLIST = b"\x32"
_BYTES = b"\x3a"
_LIST_ITEM = b"\x0a"


_Encoded = tuple[bytes, bytes]
"""A resource's or scope's fields around its records: its own message field (1), and its
schema URL field (3), empty when it has none."""
RequestCache = EncodedCache[_Encoded]
"""Each resource's and scope's encoded fields, kept across requests (an output keeps one)."""


def spans_request(
    records: Iterable[JoinedRecord], cache: RequestCache | None = None
) -> tuple[bytes | None, int]:
    """The serialized ExportTraceServiceRequest of checked spans, the bytes
    ``encode_spans(...).SerializeToString()`` makes of their SDK objects; None if none could
    be encoded; and how many were left out."""
    return _request(records, _span_record, cache)


def logs_request(
    records: Iterable[JoinedRecord], cache: RequestCache | None = None
) -> tuple[bytes | None, int]:
    """The serialized ExportLogsServiceRequest of checked logs, the bytes
    ``encode_logs(...).SerializeToString()`` makes of their SDK objects; None if none could
    be encoded; and how many were left out."""
    return _request(records, _log_record, cache)


def _span_record(record: CheckedSpan | CheckedLog | EncodedRecord) -> bytes:
    if type(record) is not CheckedSpan:  # the native core's field, or not ours
        return _encoded(record, SPAN_KIND)
    try:
        return span_item(record)
    except (OverflowError, IndexError, struct.error):  # a value past its field (checks
        raise Unrepresentable("a value past its field") from None  # keep them out)


def _log_record(record: CheckedSpan | CheckedLog | EncodedRecord) -> bytes:
    if type(record) is not CheckedLog:
        return _encoded(record, LOG_KIND)
    try:
        return log_item(record)
    except (OverflowError, IndexError, struct.error):
        raise Unrepresentable("a value past its field") from None


def _encoded(record: CheckedSpan | CheckedLog | EncodedRecord, kind: str) -> bytes:
    """The native core's protobuf field of a span or log (:mod:`.native_chunk`); a worker's
    JSON item or a record of the other kind is a caller's mistake, left out."""
    if type(record) is EncodedRecord and record.kind == kind and type(record.item) is bytes:
        return record.item
    raise Unrepresentable(f"not a checked {kind}, nor its protobuf field")


def _request(
    records: Iterable[JoinedRecord],
    encode: Callable[[Any], bytes],
    cache: RequestCache | None,
) -> tuple[bytes | None, int]:
    groups, failed = grouped(records, encode, _resource, _scope, cache or RequestCache())
    if not groups:
        return None, failed
    parts = []
    for resource_of in groups:
        scope_parts = []
        for scope_of in resource_of.used:
            scope_field, scope_url = scope_of.encoded or (b"", b"")
            scope_parts.append(
                _field(_FIELD_2, b"".join([scope_field, *scope_of.items, scope_url]))
            )
        resource_field, resource_url = resource_of.encoded or (b"", b"")
        parts.append(_field(_FIELD_1, b"".join([resource_field, *scope_parts, resource_url])))
    return b"".join(parts), failed


def _resource(resource: Resource) -> _Encoded:
    url = _text(resource.schema_url)
    attributes = _attributes(_FIELD_1, resource.attributes, clean=False)  # the SDK cleaned them
    return _field(_FIELD_1, attributes), _field(_FIELD_3, url) if url else b""


def _scope(scope: InstrumentationScope | None) -> _Encoded:
    if scope is None:
        return b"\x0a\x00", b""
    url = _text(scope.schema_url or "")
    parts = []
    if scope.name:
        parts.append(_field(_FIELD_1, _text(scope.name)))
    if scope.version:
        parts.append(_field(_FIELD_2, _text(scope.version)))
    if scope.attributes:
        parts.append(_attributes(_FIELD_3, scope.attributes, clean=False))
    return _field(_FIELD_1, b"".join(parts)), _field(_FIELD_3, url) if url else b""


def span_item(span: CheckedSpan) -> bytes:
    """A span's ``spans`` field of a ScopeSpans (raises :class:`.Unrepresentable` where
    the encoder would refuse the span)."""
    parts = [
        b"\x0a\x10"
        + span.trace_id.to_bytes(16, "big")
        + b"\x12\x08"
        + span.span_id.to_bytes(8, "big")
    ]
    if span.trace_state:
        trace_state = ",".join([f"{k}={v}" for k, v in span.trace_state])
        parts.append(_field(_SPAN_TRACE_STATE, _text(trace_state)))
    flags = CONTEXT_HAS_IS_REMOTE_MASK
    if span.parent_span_id is not None:
        parts.append(_SPAN_PARENT + span.parent_span_id.to_bytes(8, "big"))
        if span.parent_is_remote:
            flags |= CONTEXT_IS_REMOTE_MASK
    if span.name:
        parts.append(_field(_SPAN_NAME, _text(span.name)))
    # SpanKind.INTERNAL (0) is SPAN_KIND_INTERNAL (1), and so on.
    parts.append(_SPAN_KIND[span.kind])
    if span.start_time_ns:
        parts.append(_SPAN_START + _fixed64(span.start_time_ns))
    if span.end_time_ns:
        parts.append(_SPAN_END + _fixed64(span.end_time_ns))
    if span.attributes:
        parts.append(_attributes(_SPAN_ATTRIBUTE, span.attributes))
    if span.dropped_attributes:
        parts.append(_SPAN_DROPPED_ATTRIBUTES + _varint(span.dropped_attributes))
    for event in span.events:
        parts.append(_field(_SPAN_EVENT, _event(event)))
    if span.dropped_events:
        parts.append(_SPAN_DROPPED_EVENTS + _varint(span.dropped_events))
    for link in span.links:
        parts.append(_field(_SPAN_LINK, _link(link)))
    if span.dropped_links:
        parts.append(_SPAN_DROPPED_LINKS + _varint(span.dropped_links))
    code = span.status_code
    if code == 2 and span.status_description:  # the SDK keeps a description for ERROR
        status = _field(b"\x12", _text(span.status_description)) + b"\x18\x02"
        parts.append(_field(_SPAN_STATUS, status))
    elif code == 2:
        parts.append(_STATUS_ERROR)
    elif code == 1:
        parts.append(_STATUS_OK)
    else:
        parts.append(_STATUS_UNSET)
    parts.append(_SPAN_FLAGS + _fixed32(flags))
    return _field(_FIELD_2, b"".join(parts))


def _event(event: CheckedEvent) -> bytes:
    parts = []
    if event.time_ns:
        parts.append(_EVENT_TIME + _fixed64(event.time_ns))
    if event.name:
        parts.append(_field(_EVENT_NAME, _text(event.name)))
    if event.attributes:
        parts.append(_attributes(_EVENT_ATTRIBUTE, event.attributes))
    if event.dropped:
        parts.append(_EVENT_DROPPED + _varint(event.dropped))
    return b"".join(parts)


def _link(link: CheckedLink) -> bytes:
    # The encoder writes no trace state for a link.
    parts = [
        b"\x0a\x10"
        + link.trace_id.to_bytes(16, "big")
        + b"\x12\x08"
        + link.span_id.to_bytes(8, "big")
    ]
    if link.attributes:
        parts.append(_attributes(_LINK_ATTRIBUTE, link.attributes))
    if link.dropped:
        parts.append(_LINK_DROPPED + _varint(link.dropped))
    parts.append(_LINK_FLAGS[1 if link.is_remote else 0])
    return b"".join(parts)


def log_item(log: CheckedLog) -> bytes:
    """A log's ``log_records`` field of a ScopeLogs (raises :class:`.Unrepresentable`
    where the encoder would refuse the log)."""
    parts = []
    if log.time_ns:
        parts.append(_LOG_TIME + _fixed64(log.time_ns))
    if log.severity_number:
        parts.append(_LOG_SEVERITY_NUMBER + _varint(log.severity_number))
    if log.severity_text:
        parts.append(_field(_LOG_SEVERITY_TEXT, _text(log.severity_text)))
    parts.append(_field(_LOG_BODY, _value(log.body, False)))  # the SDK keeps a body as given
    if log.attributes:
        parts.append(_attributes(_LOG_ATTRIBUTE, log.attributes))
    if log.dropped_attributes:
        parts.append(_LOG_DROPPED + _varint(log.dropped_attributes))
    if log.trace_flags:
        parts.append(_LOG_FLAGS + _fixed32(log.trace_flags))
    if log.trace_id:
        parts.append(_LOG_TRACE_ID + log.trace_id.to_bytes(16, "big"))
    if log.span_id:
        parts.append(_LOG_SPAN_ID + log.span_id.to_bytes(8, "big"))
    if log.observed_time_ns:
        parts.append(_LOG_OBSERVED + _fixed64(log.observed_time_ns))
    if log.event_name:
        parts.append(_field(_LOG_EVENT_NAME, _text(log.event_name)))
    return _field(_FIELD_2, b"".join(parts))


def _text(text: str) -> bytes:
    """``text`` in UTF-8, if protobuf can carry it (no lone surrogate)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise Unrepresentable("a lone surrogate") from None


def _attributes(tag: bytes, attributes: Mapping[str, Any], clean: bool = True) -> bytes:
    """KeyValue fields with ``tag``, as the SDK cleans attributes (``clean``: ``""`` keys
    left out) and the encoder writes them (an attribute it cannot carry left out)."""
    encoded = []
    for key, value in attributes.items():
        try:
            if not key:
                if not clean:
                    encoded.append(_field(tag, _field(_VALUE, _value(value, clean))))
                continue
            key_field = _KEYS.get(key) or _key_field(key)
            kind = type(value)
            if kind is str:  # the common cases first
                value_bytes = value.encode()
                size = len(value_bytes)
                if size < 0x7E:
                    any_value = b"\x12" + _BYTE[size + 2] + b"\x0a" + _BYTE[size] + value_bytes
                else:
                    any_value = _field(_VALUE, _field(_STRING, value_bytes))
            elif kind is int and 0 <= value < 0x80:
                any_value = b"\x12\x02\x18" + _BYTE[value]
            else:
                any_value = _field(_VALUE, _value(value, clean))
            key_value = key_field + any_value
            size = len(key_value)
            if size < 0x80:
                encoded.append(tag + _BYTE[size] + key_value)
            else:
                encoded.append(tag + _varint(size) + key_value)
        except (Unrepresentable, UnicodeEncodeError):
            continue
    return b"".join(encoded)


_KEYS: dict[str, bytes] = {}
"""The KeyValue key field of each short attribute key seen."""
MAX_KEYS = 4096
"""Key fields kept in ``_KEYS``; past it, it starts again (keys of 64 characters at most)."""


def _key_field(key: str) -> bytes:
    field = _field(_KEY, key.encode())
    if len(key) <= 64:
        if len(_KEYS) >= MAX_KEYS:
            _KEYS.clear()
        _KEYS[key] = field
    return field


def _value(value: Any, clean: bool) -> bytes:
    """An AnyValue's fields; ``clean``: mappings without ``""`` keys, as the SDK keeps
    attributes."""
    kind = type(value)
    if kind is str:
        return _field(_STRING, _text(value))
    if kind is bool:
        return _TRUE if value else _FALSE
    if kind is int:
        if not S64_MIN <= value <= S64_MAX:
            raise Unrepresentable("an integer beyond 64 bits")
        return _INT + _varint(value)
    if kind is float:
        return _DOUBLE + _double(value)
    if value is None:
        return b""
    if kind is bytes:
        return _field(_BYTES, value)
    if kind is list or kind is tuple:
        return _field(_ARRAY, b"".join([_field(_LIST_ITEM, _value(v, clean)) for v in value]))
    if kind is dict:
        values = []
        for key, item in value.items():
            if key:
                values.append(
                    _field(
                        _LIST_ITEM, _field(_KEY, _text(key)) + _field(_VALUE, _value(item, clean))
                    )
                )
            elif not clean:
                values.append(_field(_LIST_ITEM, _field(_VALUE, _value(item, clean))))
        return _field(_KVLIST, b"".join(values))
    raise Unrepresentable(f"not an AnyValue: {type(value).__qualname__}")


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field."""
    size = len(payload)
    if size < 0x80:
        return tag + _BYTE[size] + payload
    return tag + _varint(size) + payload


def _varint(value: int) -> bytes:
    """An unsigned varint (a negative int64 as its 64-bit two's complement)."""
    if 0 <= value < 0x80:
        return _BYTE[value]
    value &= _U64_MASK
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
