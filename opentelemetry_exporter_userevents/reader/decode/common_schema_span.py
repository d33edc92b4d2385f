# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A Common Schema span (opentelemetry-rust-contrib's ``opentelemetry-user-events-trace``)
as a :class:`.CheckedSpan`: PartA's time is its end, PartB holds the span and renames a
few semantic-convention attributes, links come as one JSON text. docs/common-schema.md
says field by field what is written and what cannot be rebuilt."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry_exporter_userevents.reader.decode import common_schema_fields as cs
from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedLink,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.decode.common_schema_fields import (
    HEX16,
    HEX32,
    NO_SCOPE,
    AttributeSink,
    hex_id,
    safe_text,
    text,
    time_field,
    trace_context,
)
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord

MAX_LINKS = 128
"""Links kept of one span (the SDK's default limit); the rest are counted as dropped."""

SPAN_RENAMED = {
    "dbSystem": "db.system.name",
    "dbName": "db.namespace",
    "dbStatement": "db.query.text",
    "httpMethod": "http.request.method",
    "httpUrl": "url.full",
    "httpStatusCode": "http.response.status_code",
    "messagingSystem": "messaging.system",
    "messagingDestination": "messaging.destination.name",
    "messagingUrl": "messaging.url",
    "rpcSystem": "rpc.system.name",
    "rpcGrpcStatusCode": "rpc.response.status_code",
}
"""Rust's span PartB names back to today's semantic conventions (releases before its
links and statusMessage wrote ``db.system``, ``db.name``, ``db.statement`` and
``messaging.destination`` under the same names: they read as today's)."""
_SPAN_PART_B = frozenset(
    {"_typeName", "name", "startTime", "kind", "success", "parentId", "links", "statusMessage"}
)


def build_span(
    part_a: dict[str, Any], part_b: dict[str, Any], attributes: AttributeSink
) -> CheckedSpan:
    trace_id, span_id = trace_context(part_a)
    if trace_id is None:
        raise InvalidRecord(cs.TRACE_ID_MISSING)
    if span_id is None:
        raise InvalidRecord(cs.SPAN_ID_MISSING)
    if trace_id == 0:
        raise InvalidRecord(cs.TRACE_ID_ZERO)
    if span_id == 0:
        raise InvalidRecord(cs.SPAN_ID_ZERO)
    end = time_field(part_a, "time", cs.TIME, cs.TIME_MISSING)
    start = time_field(part_b, "startTime", cs.START_TIME, cs.START_TIME_MISSING)
    name = part_b.get("name")
    if name is None:
        raise InvalidRecord(cs.NAME_MISSING)
    kind = part_b.get("kind", 0)
    if type(kind) is not int or not 0 <= kind <= 4:
        raise InvalidRecord(cs.KIND)
    success = part_b.get("success", True)
    if type(success) is not bool:
        raise InvalidRecord(cs.SUCCESS)
    message = text(part_b.get("statusMessage", ""), cs.STATUS_MESSAGE)
    parent = part_b.get("parentId", "")
    if parent == "":  # a root span: no field now, "" in releases before 2025-07
        parent_id = None
    else:
        parent_id = hex_id(parent, HEX16, cs.PARENT_ID)
    links, dropped_links = _links(part_b.get("links"))
    for key, value in part_b.items():
        if key not in _SPAN_PART_B:
            attributes.add(SPAN_RENAMED.get(key, safe_text(key)), value)
    return CheckedSpan(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        parent_is_remote=False,
        trace_flags=0,
        trace_state=(),
        name=text(name, cs.NAME),
        kind=kind,
        status_code=0 if success else 2,
        status_description="" if success else safe_text(message),
        start_time_ns=start,
        end_time_ns=end,
        attributes=attributes.attributes,
        dropped_attributes=0,
        events=[],
        dropped_events=0,
        links=links,
        dropped_links=dropped_links,
        scope_text=NO_SCOPE,
        scope=None,
    )


def _links(value: Any) -> tuple[list[CheckedLink], int]:
    """Rust's ``[{"toTraceId": ..., "toSpanId": ...}]`` text as links (trace flags, state
    and attributes are not written: left at their defaults), at most :data:`MAX_LINKS`."""
    if value is None:
        return [], 0
    try:
        items = json.loads(text(value, cs.LINKS))
    except (ValueError, RecursionError):
        raise InvalidRecord(cs.LINKS) from None
    if type(items) is not list:
        raise InvalidRecord(cs.LINKS)
    links = []
    for item in items[:MAX_LINKS]:
        if type(item) is not dict:
            raise InvalidRecord(cs.LINKS)
        links.append(
            CheckedLink(
                trace_id=hex_id(item.get("toTraceId"), HEX32, cs.LINKS),
                span_id=hex_id(item.get("toSpanId"), HEX16, cs.LINKS),
                trace_flags=0,
                trace_state=(),
                is_remote=False,
                attributes={},
                dropped=0,
            )
        )
    return links, max(0, len(items) - MAX_LINKS)
