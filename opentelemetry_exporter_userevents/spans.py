# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A ReadableSpan as an ``otel_span`` record (the SPAN schema).

Typed fields carry what people filter on (times, duration, ids, kind, status, flags);
texts carry the rest, readable in ``trace``: attributes, events, links and scope in the
value encoding (JSON), the name, status description and trace state as plain text.
A span too large for the record is cut to fit: texts longer than an eighth of the record are
shortened with a marker, then events, links and attributes are dropped (their dropped counts
say how many), then texts are shortened further; the ``truncated`` bits say which.

Attributes, events and links of plain values (the common case) are written straight to
JSON text, byte for byte what the general value encoding writes for them, at a fraction
of its cost; anything else takes the general path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents import anyvalue
from opentelemetry_exporter_userevents.schema import (
    SPAN,
    TRUNCATED_ATTRIBUTES,
    TRUNCATED_EVENTS,
    TRUNCATED_LINKS,
    TRUNCATED_TEXT,
    TRUNCATION_MARK,
    encode_plain,
)

NO_PARENT = b"0" * 16


def encode_attributes(attributes: Mapping[str, Any] | None) -> tuple[bytes, int]:
    """Attributes as a JSON object, and how many were dropped for unencodable values."""
    if attributes is None:
        return b"{}", 0
    text = anyvalue.encode_flat(attributes)  # also writes an empty mapping as {}
    if text is not None:
        return text.encode(), 0
    if not attributes:
        return b"{}", 0
    try:
        return anyvalue.encode(attributes, "attributes").encode(), 0
    except anyvalue.UnsupportedValue:
        kept = encodable(attributes)
        return anyvalue.encode(kept).encode(), len(attributes) - len(kept)


def encodable(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes whose key and value the value encoding accepts."""
    return {key: attributes[key] for key in _encoded_sizes(attributes)}


def _encoded_sizes(attributes: Mapping[str, Any]) -> dict[str, int]:
    """The length of ``{key: value}``'s text for each attribute the value encoding accepts."""
    sizes = {}
    for key, value in attributes.items():
        try:
            sizes[key] = len(anyvalue.encode({key: value}))
        except anyvalue.UnsupportedValue:
            continue
    return sizes


_scopes: dict[int, tuple[InstrumentationScope | None, bytes]] = {}  # id(scope) -> scope, text


def encode_scope(scope: InstrumentationScope | None) -> bytes:
    """The scope as JSON ``{name, version, schema_url, attributes}`` (cached per scope
    object: a tracer keeps one, and they are few)."""
    known = _scopes.get(id(scope))
    if known is not None and known[0] is scope:
        return known[1]
    if scope is None:
        text = b"{}"
    else:
        attributes, _ = encode_attributes(scope.attributes)
        value = {"name": scope.name, "version": scope.version, "schema_url": scope.schema_url}
        head = anyvalue.encode(value).encode()
        text = head[:-1] + b',"attributes":' + attributes + b"}"
    if len(_scopes) >= 256:  # never let it grow unbounded
        _scopes.clear()
    _scopes[id(scope)] = (scope, text)  # the reference keeps the id from being reused
    return text


def _event(event: Any) -> dict[str, Any]:
    return {
        "name": event.name,
        "time_ns": event.timestamp,
        "attributes": dict(event.attributes or {}),
        "dropped": event.dropped_attributes,
    }


def _link(link: Any) -> dict[str, Any]:
    context = link.context
    return {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "trace_flags": int(context.trace_flags),
        "trace_state": context.trace_state.to_header() if context.trace_state else "",
        "is_remote": context.is_remote,
        "attributes": dict(link.attributes or {}),
        "dropped": link.dropped_attributes,
    }


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
    return (
        f'{{"name":{name},"time_ns":{time_ns},"attributes":{attributes_text},"dropped":{dropped}}}'
    )


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
    return (
        f'{{"trace_id":"{context.trace_id:032x}","span_id":"{context.span_id:016x}",'
        f'"trace_flags":{int(context.trace_flags)},"trace_state":{trace_state},'
        f'"is_remote":{"true" if is_remote else "false"},"attributes":{attributes_text},'
        f'"dropped":{dropped}}}'
    )


def _encode_list(
    items: Sequence[Any], fast: Callable[[Any], str | None], general: Callable[[Any], dict]
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
            kept = encodable(item["attributes"])
            dropped = item["dropped"] + len(item["attributes"]) - len(kept)
            cleaned.append({**item, "attributes": kept, "dropped": dropped})
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
        (1 if parent else 0) | (2 if parent is not None and parent.is_remote else 0),
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
    """Cut parts of a span until it fits; update texts and dropped counts in place."""
    truncated = 0

    def over() -> int:
        return SPAN.size(texts) - max_size

    def shrink(parts: list[bytes], slot: int, count: int, flag: int) -> None:
        nonlocal truncated
        if over() > 0 and parts:
            texts[slot], left_out = drop_last(parts, over())
            dropped[count] += left_out
            truncated |= flag

    for slot in (_NAME, _DESCRIPTION, _TRACE_STATE, _SCOPE):  # a huge text must not push out
        if over() > 0 and len(texts[slot]) > max_size // 8:  # everything else
            texts[slot] = cut_text(texts[slot], max_size // 8)
            truncated |= TRUNCATED_TEXT
    shrink(events, _EVENTS, 1, TRUNCATED_EVENTS)
    shrink(links, _LINKS, 2, TRUNCATED_LINKS)
    if over() > 0 and attributes:
        texts[_ATTRIBUTES], left_out = drop_largest(texts[_ATTRIBUTES], over())
        dropped[0] += left_out
        truncated |= TRUNCATED_ATTRIBUTES if left_out else 0
    for slot in (_NAME, _DESCRIPTION, _TRACE_STATE, _SCOPE):
        if over() > 0:
            texts[slot] = cut_text(texts[slot], len(texts[slot]) - over())
            truncated |= TRUNCATED_TEXT
    return truncated


def drop_last(parts: list[bytes], over: int) -> tuple[bytes, int]:
    """The JSON list of the items whose texts are ``parts``, with items left out from the end
    until it is ``over`` bytes shorter (or empty), and how many were left out. A list's text
    is its items' texts joined by commas, so the cost stays linear in the items."""
    kept = len(parts)
    while over > 0 and kept:
        kept -= 1
        over -= len(parts[kept]) + (1 if kept else 0)  # the item and the comma before it
    return b"[" + b",".join(parts[:kept]) + b"]", len(parts) - kept


def drop_largest(text: bytes, over: int) -> tuple[bytes, int]:
    """The attributes ``text`` (a JSON object) with the largest attributes left out until it
    is ``over`` bytes shorter (or empty), and how many were left out. Linear in the number of
    attributes: each is measured once, and the result is encoded once (a few more times only
    for the ``~m`` form, whose size is not the sum of its attributes')."""
    kept = anyvalue.decode(text.decode())
    size = {key: len(anyvalue.encode({key: value})) - 1 for key, value in kept.items()}
    by_size = sorted(kept, key=size.__getitem__)
    left_out = 0
    estimate = over
    while estimate > 0 and by_size:
        key = by_size.pop()
        estimate -= size[key]  # '"key":value' and one comma
        del kept[key]
        left_out += 1
    result = anyvalue.encode(kept).encode()
    batch = 1
    while len(text) - len(result) < over and by_size:  # the ~m form: drop more, in doublings
        for _ in range(min(batch, len(by_size))):
            del kept[by_size.pop()]
            left_out += 1
        batch *= 2
        result = anyvalue.encode(kept).encode()
    return result, left_out


def cut_text(text: bytes, size: int) -> bytes:
    """``text`` cut to at most ``size`` bytes, ending with the marker, as valid UTF-8 that a
    reader decodes as plain text (an encoded form is replaced by its readable prefix)."""
    mark = TRUNCATION_MARK.encode()
    keep = max(size - len(mark), 0)
    readable = text.decode("utf-8")
    if readable.startswith(('"', "{")):  # a JSON form: keep a plain, printable prefix
        prefix = readable.lstrip('"{')[:keep]  # no more characters than bytes can be kept
        readable = "".join(c if c.isprintable() else "?" for c in prefix)
    cut = readable.encode()[:keep].decode("utf-8", "ignore")
    return cut.encode() + mark
