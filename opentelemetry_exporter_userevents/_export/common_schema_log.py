# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A ReadableLogRecord as a Common Schema 4.0 EventHeader event, laid out as
opentelemetry-rust-contrib's ``opentelemetry-user-events-logs`` writes one (see
docs/common-schema.md, "Our exporters' EventHeader output", for the commit read): event
``Log`` at the level of its severity; ``__csver__``; PartA time (else the observed time),
trace and span id (when the record has them), cloud role; PartC the attributes but an
integer ``event_id``; PartB ``_typeName``, ``body``, ``severityNumber``, ``severityText``,
``eventId``, ``name`` (the event name, when not blank). Trace flags, the observed time (when
there is a time), the scope and dropped counts have no field and are not written.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.sdk._logs import ReadableLogRecord

from opentelemetry_exporter_userevents._export import common_schema_envelope as cs
from opentelemetry_exporter_userevents._export import eventheader_encoder as eh
from opentelemetry_exporter_userevents._export.eventheader_encoder import Field
from opentelemetry_exporter_userevents._export.eventheader_fit import EventFitter
from opentelemetry_exporter_userevents._export.log_encoder import severity_value

_EVENT_NAME = b"Log\0"
_TYPE_NAME = eh.string(b"_typeName\0", b"Log")
_BODY = b"body\0"
_EVENT_ID = "event_id"
_OVERHEAD = (
    eh.HEAD_SIZE
    + len(_EVENT_NAME)
    + eh.size([cs.CS_VERSION])
    + 3 * len(eh.struct_head(cs.PART_A, 1))
)
"""The bytes outside the parts (PartC's head counted as if always there)."""


def _body(body: Any) -> Field:
    """Rust's body: a string, i64, bool or f64 as itself (a larger integer as its text),
    anything else ``""``."""
    if isinstance(body, str | bool | int | float):
        return eh.attribute(_BODY, body)
    return eh.string(_BODY, b"")


def encode_log(
    readable: ReadableLogRecord, resource_id: int, max_size: int, role: cs.CloudRole
) -> tuple[bytes, bool]:
    """The record of a log, and whether it had to be cut to fit (``resource_id`` unused:
    the resource travels in PartA)."""
    record = readable.log_record
    number = severity_value(record.severity_number)
    when = record.timestamp or record.observed_timestamp or time.time_ns()
    part_a = [eh.string(cs.TIME, cs.rfc3339(when))]
    if record.trace_id:
        part_a.append(eh.string(cs.TRACE_ID, cs.hex_id(record.trace_id, 32)))
        part_a.append(eh.string(cs.SPAN_ID, cs.hex_id(record.span_id or 0, 16)))
    part_a += role.fields(readable.resource)
    part_c: list[Field] = []
    event_id = None
    truncated = False
    for key, value in (record.attributes or {}).items():
        if key == _EVENT_ID and type(value) is int and -(1 << 63) <= value < 1 << 63:
            event_id = value
            continue
        field_name = eh.cached_name(key)
        if field_name is None or len(part_c) == eh.MAX_STRUCT_FIELDS:
            truncated = True
            continue
        part_c.append(eh.attribute(field_name, value))
    part_b = [_TYPE_NAME]
    if record.body is not None:
        part_b.append(_body(record.body))
    part_b.append(eh.i16(b"severityNumber\0", number))
    if record.severity_text is not None:
        text = eh.utf8(str(record.severity_text))[: eh.MAX_STRING_BYTES]
        part_b.append(eh.string(b"severityText\0", text))
    if event_id is not None:
        part_b.append(eh.i64(b"eventId\0", event_id))
    event_name = record.event_name
    if event_name and event_name.strip():
        part_b.append(eh.string(b"name\0", eh.utf8(event_name)[: eh.MAX_STRING_BYTES]))
    parts = [part_a, part_c, part_b]
    level = cs.level(number)
    data = _event(level, parts)
    if len(data) > max_size:
        fitter = EventFitter(parts, _OVERHEAD, max_size)
        fitter.cap_texts(skip=_BODY)
        fitter.drop_fields(part_c, cut_first=part_b)
        fitter.cut_texts(part_b)
        fitter.check()
        truncated |= fitter.truncated
        data = _event(level, parts)
    return data, truncated


def _event(level: int, parts: list[list[Field]]) -> bytes:
    part_a, part_c, part_b = parts
    return eh.event(
        _EVENT_NAME,
        level,
        [
            (b"", [cs.CS_VERSION]),
            (eh.struct_head(cs.PART_A, len(part_a)), part_a),
            *([(eh.struct_head(cs.PART_C, len(part_c)), part_c)] if part_c else []),
            (eh.struct_head(cs.PART_B, len(part_b)), part_b),
        ],
    )
