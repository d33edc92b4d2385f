# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A ReadableSpan as a Common Schema 4.0 EventHeader event, laid out as
opentelemetry-rust-contrib's ``opentelemetry-user-events-trace`` writes one (see
docs/common-schema.md, "Our exporters' EventHeader output", for the commit read): event
``Span``; ``__csver__``; PartA time (the end), trace and span id, cloud role; PartB
``_typeName``, ``name``, ``startTime``, ``success``, ``kind``, ``parentId`` (not for a
root), ``links`` (JSON), the well-known attributes under their Common Schema names and
``statusMessage``; PartC the other attributes. Events, trace state, flags and the scope
have no field and are not written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from opentelemetry_exporter_userevents._export import common_schema_envelope as cs
from opentelemetry_exporter_userevents._export import eventheader_encoder as eh
from opentelemetry_exporter_userevents._export.eventheader_encoder import Field
from opentelemetry_exporter_userevents._export.eventheader_fit import EventFitter

WELL_KNOWN: dict[str, bytes] = {
    key: eh.name(value) or b""
    for key, value in {
        "db.system.name": "dbSystem",
        "db.namespace": "dbName",
        "db.query.text": "dbStatement",
        "http.request.method": "httpMethod",
        "url.full": "httpUrl",
        "http.response.status_code": "httpStatusCode",
        "messaging.system": "messagingSystem",
        "messaging.destination.name": "messagingDestination",
        "messaging.url": "messagingUrl",
        "rpc.system.name": "rpcSystem",
        "rpc.response.status_code": "rpcGrpcStatusCode",
    }.items()
}
"""Attributes written in PartB under Rust's names (its ``get_well_known_attributes``)."""
_HTTP_STATUS = "http.response.status_code"
_EVENT_NAME = b"Span\0"
_TYPE_NAME = eh.string(b"_typeName\0", b"Span")
_PART_C_HEAD = eh.struct_head(cs.PART_C, 1)
_LINK = b'{"toTraceId":"%032x","toSpanId":"%016x"}'
_LINK_SIZE = len(_LINK % (0, 0)) + 1
_TRUE = eh.boolean(b"success\0", True)
_FALSE = eh.boolean(b"success\0", False)
_KINDS = [eh.u32(b"kind\0", kind) for kind in range(5)]
_OVERHEAD = (
    eh.HEAD_SIZE
    + len(_EVENT_NAME)
    + eh.size([cs.CS_VERSION])
    + 3 * len(eh.struct_head(cs.PART_A, 1))
)
"""The bytes outside the parts (PartC's head counted as if always there)."""


def attributes(values: Mapping[str, Any] | None) -> tuple[list[Field], list[Field], bool]:
    """PartB's well-known attributes, PartC's others, and whether any was left out (a
    name EventHeader cannot hold, or past MAX_STRUCT_FIELDS)."""
    part_b: list[Field] = []
    part_c: list[Field] = []
    left_out = False
    for key, value in (values or {}).items():
        well_known = WELL_KNOWN.get(key)
        if well_known is not None:
            part_b.append(eh.attribute(well_known, value))
            continue
        field_name = eh.cached_name(key)
        if field_name is None or len(part_c) == eh.MAX_STRUCT_FIELDS:
            left_out = True
            continue
        part_c.append(eh.attribute(field_name, value))
    return part_b, part_c, left_out


def encode_span(
    span: ReadableSpan, resource_id: int, max_size: int, role: cs.CloudRole
) -> tuple[bytes, bool]:
    """The record of a span, and whether it had to be cut to fit (``resource_id`` unused:
    the resource travels in PartA). Raises for a span that cannot be one (no end time)."""
    context = span.context
    if context is None or span.start_time is None or span.end_time is None:
        raise ValueError("a span without context, start or end time")
    part_a = [
        eh.string(cs.TIME, cs.rfc3339(span.end_time)),
        eh.string(cs.TRACE_ID, cs.hex_id(context.trace_id, 32)),
        eh.string(cs.SPAN_ID, cs.hex_id(context.span_id, 16)),
        *role.fields(span.resource),
    ]
    status = span.status
    error = status.status_code is StatusCode.ERROR
    kind = span.kind.value
    part_b = [
        _TYPE_NAME,
        eh.string(b"name\0", eh.utf8(span.name)[: eh.MAX_STRING_BYTES]),
        eh.string(b"startTime\0", cs.rfc3339(span.start_time)),
        _FALSE if error else _TRUE,
        _KINDS[kind] if 0 <= kind <= 4 else eh.u32(b"kind\0", 0),
    ]
    if span.parent is not None and span.parent.span_id:
        part_b.append(eh.string(b"parentId\0", cs.hex_id(span.parent.span_id, 16)))
    links = [(link.context.trace_id, link.context.span_id) for link in span.links]
    if links:
        part_b.append(_links(links))
    well_known, part_c, truncated = attributes(span.attributes)
    part_b += well_known
    description = status.description
    if error and description and not (span.attributes and _HTTP_STATUS in span.attributes):
        part_b.append(eh.string(b"statusMessage\0", eh.utf8(description)[: eh.MAX_STRING_BYTES]))
    parts = [part_a, part_b, part_c]
    data = _event(parts)
    if len(data) > max_size:
        truncated |= _fit(parts, links, max_size)
        data = _event(parts)
    return data, truncated


def _event(parts: list[list[Field]]) -> bytes:
    part_a, part_b, part_c = parts
    return eh.event(
        _EVENT_NAME,
        cs.SPAN_LEVEL,
        [
            (b"", [cs.CS_VERSION]),
            (eh.struct_head(cs.PART_A, len(part_a)), part_a),
            (eh.struct_head(cs.PART_B, len(part_b)), part_b),
            *([(eh.struct_head(cs.PART_C, len(part_c)), part_c)] if part_c else []),
        ],
    )


def _links(links: list[tuple[int, int]]) -> Field:
    text = b"[" + b",".join(_LINK % link for link in links) + b"]"
    return eh.string(b"links\0", text)


def _fit(parts: list[list[Field]], links: list[tuple[int, int]], max_size: int) -> bool:
    """Cut the span's fields to fit: long texts, links from the end, PartC's largest
    attributes, then texts (the name first)."""
    part_a, part_b, part_c = parts
    fitter = EventFitter(parts, _OVERHEAD, max_size)
    fitter.cap_texts()
    over = fitter.over()
    if over > 0 and links:
        index = next(i for i, field in enumerate(part_b) if field[0].startswith(b"links\0"))
        kept = max(len(links) - -(-over // _LINK_SIZE), 0)
        if kept:
            part_b[index] = _links(links[:kept])
        else:
            del part_b[index]
        fitter.truncated = True
    fitter.drop_fields(part_c)
    fitter.cut_texts(part_b)
    fitter.check()
    return fitter.truncated
