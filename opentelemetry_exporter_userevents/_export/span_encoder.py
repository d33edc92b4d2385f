# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The span encoder: a ReadableSpan as an ``otel_span`` record (the SPAN schema).

Typed fields carry what people filter on (times, duration, ids, kind, status, flags);
texts carry the rest, readable in ``trace``: attributes, events, links and scope in the
value encoding (JSON), the name, status description and trace state as plain text.
A span too large for the record is cut to fit (:mod:`.fit`): texts longer than an eighth of
the record are shortened with a marker, then events, links and attributes are dropped (their
dropped counts say how many), then texts are shortened further; the ``truncated`` bits say
which.

Attributes, events and links of plain values (the common case) are written straight to
JSON text, byte for byte what the general value encoding writes for them, at a fraction
of its cost; anything else takes the general path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from opentelemetry_exporter_userevents._export.attributes import (
    encodable,
    encode_attributes,
    encode_scope,
)
from opentelemetry_exporter_userevents._export.fit import RecordFitter
from opentelemetry_exporter_userevents.record import anyvalue, json_keys
from opentelemetry_exporter_userevents.record.flags import (
    PARENT_PRESENT,
    PARENT_REMOTE,
    TRUNCATED_EVENTS,
    TRUNCATED_LINKS,
)
from opentelemetry_exporter_userevents.record.plain_text import encode_plain
from opentelemetry_exporter_userevents.record.schema import SPAN

NO_PARENT = b"0" * 16
_EVENT_TEMPLATE = json_keys.json_template(json_keys.EVENT_KEYS)
_LINK_TEMPLATE = json_keys.json_template(json_keys.LINK_KEYS)


def _event(event: Any) -> dict[str, Any]:
    values = (event.name, event.timestamp, dict(event.attributes or {}), event.dropped_attributes)
    return dict(zip(json_keys.EVENT_KEYS, values, strict=True))


def _link(link: Any) -> dict[str, Any]:
    context = link.context
    values = (
        format(context.trace_id, "032x"),
        format(context.span_id, "016x"),
        int(context.trace_flags),
        context.trace_state.to_header() if context.trace_state else "",
        context.is_remote,
        dict(link.attributes or {}),
        link.dropped_attributes,
    )
    return dict(zip(json_keys.LINK_KEYS, values, strict=True))


_INT_LIMIT = 1 << 63  # ints below this in magnitude are written as themselves by anyvalue


def _event_text(event: Any) -> str | None:
    """The fast path of one event: what encoding ``[_event(event)]`` writes between the
    brackets, or None when the general path must write it."""
    attributes = event.attributes
    attributes_text = anyvalue.encode_flat(attributes) if attributes else "{}"
    name = anyvalue.encode_str(event.name)
    time_ns = event.timestamp
    dropped = event.dropped_attributes
    if (
        attributes_text is None
        or name is None
        or type(time_ns) is not int
        or type(dropped) is not int
        or not -_INT_LIMIT < time_ns < _INT_LIMIT
        or not 0 <= dropped < _INT_LIMIT
    ):
        return None
    return _EVENT_TEMPLATE % (name, time_ns, attributes_text, dropped)


def _link_text(link: Any) -> str | None:
    """The fast path of one link, as :func:`_event_text` for events."""
    context = link.context
    attributes = link.attributes
    attributes_text = anyvalue.encode_flat(attributes) if attributes else "{}"
    trace_state = anyvalue.encode_str(
        context.trace_state.to_header() if context.trace_state else ""
    )
    is_remote = context.is_remote
    dropped = link.dropped_attributes
    if (
        attributes_text is None
        or trace_state is None
        or type(is_remote) is not bool
        or type(dropped) is not int
        or not 0 <= dropped < _INT_LIMIT
    ):
        return None
    return _LINK_TEMPLATE % (
        f'"{context.trace_id:032x}"',
        f'"{context.span_id:016x}"',
        int(context.trace_flags),
        trace_state,
        "true" if is_remote else "false",
        attributes_text,
        dropped,
    )


def _encode_list(
    items: Sequence[Any],
    fast: Callable[[Any], str | None],
    general: Callable[[Any], dict[str, Any]],
) -> tuple[bytes, list[bytes]]:
    """Events or links as a JSON list, and each item's text (for cutting to fit)."""
    parts = []
    for item in items:
        text = fast(item)
        if text is None:
            return _encode_list_general([general(item) for item in items])
        parts.append(text.encode())
    return b"[" + b",".join(parts) + b"]", parts


def _encode_list_general(items: list[dict[str, Any]]) -> tuple[bytes, list[bytes]]:
    """Encode event/link dicts, leaving out attributes that cannot be encoded (each item's
    ``dropped`` counts them)."""
    try:
        text = anyvalue.encode(items)
    except anyvalue.UnsupportedValue:
        cleaned = []
        for item in items:
            attributes = item[json_keys.ATTRIBUTES]
            kept = encodable(attributes)
            dropped = item[json_keys.DROPPED] + len(attributes) - len(kept)
            cleaned.append({**item, json_keys.ATTRIBUTES: kept, json_keys.DROPPED: dropped})
        items = cleaned
        text = anyvalue.encode(items)
    # One item in a list sits as deep as in the whole list: its text is the same slice.
    parts = [anyvalue.encode([item])[1:-1].encode() for item in items]
    return text.encode(), parts


def encode_span(span: ReadableSpan, resource_id: int, max_size: int) -> tuple[bytes, bool]:
    """The record payload of ``span``, and whether it had to be cut to fit ``max_size``."""
    context = span.context
    parent = span.parent
    status = span.status
    start = span.start_time or 0
    end = span.end_time or 0
    attributes, bad_attributes = encode_attributes(span.attributes)
    events = span.events
    links = span.links
    events_text, event_parts = _encode_list(events, _event_text, _event) if events else (b"[]", [])
    links_text, link_parts = _encode_list(links, _link_text, _link) if links else (b"[]", [])
    description = status.description
    trace_state = context.trace_state
    texts = [
        encode_plain(span.name or ""),
        encode_plain(description) if description else b"",
        encode_plain(trace_state.to_header()) if trace_state else b"",
        attributes,
        events_text,
        links_text,
        encode_scope(span.instrumentation_scope),
    ]
    dropped = [span.dropped_attributes + bad_attributes, span.dropped_events, span.dropped_links]
    truncated = 0
    if _SPAN_OVERHEAD + sum(map(len, texts)) > max_size:
        truncated = _fit(texts, dropped, span.attributes, event_parts, link_parts, max_size)
    fixed = (
        start,
        end,
        max(end - start, 0),
        resource_id,
        b"%032x" % context.trace_id,
        b"%016x" % context.span_id,
        b"%016x" % parent.span_id if parent else NO_PARENT,
        *dropped,
        span.kind._value_,  # the documented sunder name: a plain read, unlike .value
        status.status_code._value_,
        context.trace_flags,
        (PARENT_PRESENT if parent else 0)
        | (PARENT_REMOTE if parent is not None and parent.is_remote else 0),
        truncated,
    )
    return SPAN.pack(fixed, texts), bool(truncated)


_SPAN_OVERHEAD = SPAN.size([b""] * len(SPAN.texts))
"""The payload size of a span whose texts are all empty: the fixed fields and the NULs."""


# Indexes of the SPAN texts.
_NAME, _DESCRIPTION, _TRACE_STATE, _ATTRIBUTES, _EVENTS, _LINKS, _SCOPE = range(7)


def _fit(
    texts: list[bytes],
    dropped: list[int],
    attributes: Mapping[str, Any] | None,
    events: list[bytes],
    links: list[bytes],
    max_size: int,
) -> int:
    """Cut parts of a span until it fits (the steps of :mod:`.fit`, in the span's order);
    update texts and dropped counts in place; return the ``truncated`` bits."""
    fitter = RecordFitter(SPAN, texts, max_size)
    fitter.cap_texts(_CUTTABLE)
    dropped[1] += fitter.drop_items(_EVENTS, events, TRUNCATED_EVENTS)
    dropped[2] += fitter.drop_items(_LINKS, links, TRUNCATED_LINKS)
    dropped[0] += fitter.drop_attributes(_ATTRIBUTES, attributes)
    fitter.cut_texts(_CUTTABLE)
    return fitter.truncated


_CUTTABLE = (_NAME, _DESCRIPTION, _TRACE_STATE, _SCOPE)
