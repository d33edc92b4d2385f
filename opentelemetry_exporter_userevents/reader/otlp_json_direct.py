# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OTLP/JSON straight from checked records: the ``ExportTraceServiceRequest`` and
``ExportLogsServiceRequest`` objects :mod:`.otlp_json` makes from SDK objects (the OTLP
exporters' encoder, then protobuf's JSON mapping), written without either.

Each record comes joined to the SDK ``Resource`` and ``InstrumentationScope`` objects the
:class:`~.rebuild.Rebuilder` keeps (one per distinct resource and scope): they group the
records exactly as the encoder groups them (by their own equality, first seen first), and
their encoded form is made once, not per record. Everything else is written from the
checked values, as the SDK would have kept them and the encoder written them:

- attributes as the SDK cleans them (keys ``""`` left out, at every level), an attribute
  the encoder cannot carry left out (an integer beyond 64 bits, a string with a lone
  surrogate); a log body as given;
- the JSON mapping's defaults left out (zero numbers, empty strings and lists), but messages
  and ``oneof`` values present even when empty (``"status": {}``, ``"body": {}``,
  ``{"intValue": "0"}``); 64-bit integers as strings, enums as integers, ids in hex, bytes
  in base64, non-finite doubles as ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
- span and link ``flags`` as the encoder sets them: "has is_remote", and "is remote" for a
  remote parent or link.

A record the encoder would refuse as a whole (a name with a lone surrogate, a log body
integer beyond 64 bits) is left out and counted, as :func:`.otlp_json.skipping_unrepresentable`
does. ``tests/test_otlp_json_direct.py`` proves the two equal over every value kind.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents.reader.checked_records import (
    CheckedEvent,
    CheckedLink,
    CheckedLog,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.rebuild import JoinedRecord

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_CACHE = 4096
_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


class Unrepresentable(ValueError):
    """A value OTLP cannot carry: an integer beyond 64 bits, a lone surrogate."""


def spans_request(
    records: Iterable[JoinedRecord], cache: EncodedCache | None = None
) -> tuple[dict[str, Any] | None, int]:
    """An ExportTraceServiceRequest of checked spans, as :func:`.otlp_json.spans_request`
    writes it; None if none could be written; and how many were left out."""
    return _request(records, _span, "resourceSpans", "scopeSpans", "spans", cache)


def logs_request(
    records: Iterable[JoinedRecord], cache: EncodedCache | None = None
) -> tuple[dict[str, Any] | None, int]:
    """An ExportLogsServiceRequest of checked logs, as :func:`.otlp_json.logs_request`
    writes it; None if none could be written; and how many were left out."""
    return _request(records, _log, "resourceLogs", "scopeLogs", "logRecords", cache)


class EncodedCache:
    """The encoded form of each Resource and InstrumentationScope object (by identity:
    the rebuilder keeps one per distinct value), or None where OTLP cannot carry it."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[object, dict[str, Any] | None]] = {}

    def get(self, item: Any, encode: Callable[[Any], dict[str, Any]]) -> dict[str, Any] | None:
        try:
            return self._items[id(item)][1]
        except KeyError:
            pass
        encoded: dict[str, Any] | None
        try:
            encoded = encode(item)
        except Unrepresentable:
            encoded = None
        if len(self._items) >= _CACHE:
            self._items.clear()
        self._items[id(item)] = (item, encoded)  # the item kept: its id is not reused
        return encoded


class _Group:
    """Records of equal resources (or scopes): the first object seen, its encoded form
    (compared by identity: one group per distinct value)."""

    __slots__ = ("encoded", "first")

    def __init__(self, first: Any, encoded: dict[str, Any] | None) -> None:
        self.first = first
        self.encoded = encoded


def _grouper(
    cache: EncodedCache, encode: Callable[[Any], dict[str, Any]]
) -> Callable[[Any], _Group]:
    """The group of an object, as the encoder's dict of them finds it (by equality, the
    first seen kept), looked up once per distinct object."""
    by_id: dict[int, _Group] = {}
    by_value: dict[Any, _Group] = {}

    def group(item: Any) -> _Group:
        try:
            return by_id[id(item)]
        except KeyError:
            pass
        found = by_value.get(item)
        if found is None:
            found = by_value[item] = _Group(item, cache.get(item, encode))
        by_id[id(item)] = found  # by_value holds an equal item; by_id's keeps this one
        keep.append(item)
        return found

    keep: list[Any] = []  # the items looked up by id, alive while the ids are used
    return group


def _request(
    records: Iterable[JoinedRecord],
    encode: Callable[[Any], dict[str, Any]],
    resources_key: str,
    scopes_key: str,
    items_key: str,
    cache: EncodedCache | None,
) -> tuple[dict[str, Any] | None, int]:
    cache = cache or EncodedCache()
    resource_group = _grouper(cache, _resource)
    scope_group = _grouper(cache, _scope)
    # Grouped by resource, then scope, first seen first, as the encoder's dicts do.
    groups: dict[_Group, dict[_Group, list[dict[str, Any]]]] = {}
    failed = 0
    for checked, resource, scope in records:
        resource_of = resource_group(resource)
        scope_of = scope_group(scope)
        if resource_of.encoded is None or scope_of.encoded is None:
            failed += 1
            continue
        try:
            encoded = encode(checked)
        except Unrepresentable:
            failed += 1
            continue
        by_scope = groups.get(resource_of)
        if by_scope is None:
            by_scope = groups[resource_of] = {}
        items = by_scope.get(scope_of)
        if items is None:
            items = by_scope[scope_of] = []
        items.append(encoded)
    if not groups:
        return None, failed
    resource_items = []
    for resource_of, by_scope in groups.items():
        scope_items = []
        for scope_of, items in by_scope.items():
            scope_item: dict[str, Any] = {"scope": scope_of.encoded, items_key: items}
            if scope_of.first is not None and scope_of.first.schema_url:
                scope_item["schemaUrl"] = scope_of.first.schema_url
            scope_items.append(scope_item)
        resource_item = {"resource": resource_of.encoded, scopes_key: scope_items}
        if resource_of.first.schema_url:
            resource_item["schemaUrl"] = resource_of.first.schema_url
        resource_items.append(resource_item)
    return {resources_key: resource_items}, failed


def _resource(resource: Resource) -> dict[str, Any]:
    _text(resource.schema_url)
    encoded: dict[str, Any] = {}
    attributes = _attributes(resource.attributes, clean=False)  # the SDK cleaned them
    if attributes:
        encoded["attributes"] = attributes
    return encoded


def _scope(scope: InstrumentationScope | None) -> dict[str, Any]:
    encoded: dict[str, Any] = {}
    if scope is None:
        return encoded
    _text(scope.schema_url or "")
    if scope.name:
        encoded["name"] = _text(scope.name)
    if scope.version:
        encoded["version"] = _text(scope.version)
    attributes = _attributes(scope.attributes or {}, clean=False)
    if attributes:
        encoded["attributes"] = attributes
    return encoded


def _span(span: CheckedSpan) -> dict[str, Any]:
    encoded: dict[str, Any] = {
        "traceId": f"{span.trace_id:032x}",
        "spanId": f"{span.span_id:016x}",
    }
    if span.trace_state:
        encoded["traceState"] = _text(",".join(f"{k}={v}" for k, v in span.trace_state))
    flags = _HAS_IS_REMOTE
    if span.parent_span_id is not None:
        encoded["parentSpanId"] = f"{span.parent_span_id:016x}"
        if span.parent_is_remote:
            flags |= _IS_REMOTE
    if span.name:
        encoded["name"] = _text(span.name)
    encoded["kind"] = span.kind + 1  # SpanKind.INTERNAL (0) is SPAN_KIND_INTERNAL (1)...
    if span.start_time_ns:
        encoded["startTimeUnixNano"] = str(span.start_time_ns)
    if span.end_time_ns:
        encoded["endTimeUnixNano"] = str(span.end_time_ns)
    if span.attributes:
        attributes = _attributes(span.attributes)
        if attributes:
            encoded["attributes"] = attributes
    if span.dropped_attributes:
        encoded["droppedAttributesCount"] = span.dropped_attributes
    if span.events:
        encoded["events"] = [_event(event) for event in span.events]
    if span.dropped_events:
        encoded["droppedEventsCount"] = span.dropped_events
    if span.links:
        encoded["links"] = [_link(link) for link in span.links]
    if span.dropped_links:
        encoded["droppedLinksCount"] = span.dropped_links
    status: dict[str, Any] = {}
    if span.status_code == 2 and span.status_description:  # the SDK keeps it for ERROR
        status["message"] = _text(span.status_description)
    if span.status_code:
        status["code"] = span.status_code
    encoded["status"] = status
    encoded["flags"] = flags
    return encoded


def _event(event: CheckedEvent) -> dict[str, Any]:
    encoded: dict[str, Any] = {}
    if event.time_ns:
        encoded["timeUnixNano"] = str(event.time_ns)
    if event.name:
        encoded["name"] = _text(event.name)
    if event.attributes:
        attributes = _attributes(event.attributes)
        if attributes:
            encoded["attributes"] = attributes
    if event.dropped:
        encoded["droppedAttributesCount"] = event.dropped
    return encoded


def _link(link: CheckedLink) -> dict[str, Any]:
    encoded: dict[str, Any] = {
        "traceId": f"{link.trace_id:032x}",
        "spanId": f"{link.span_id:016x}",
    }  # the encoder writes no trace state for a link
    if link.attributes:
        attributes = _attributes(link.attributes)
        if attributes:
            encoded["attributes"] = attributes
    if link.dropped:
        encoded["droppedAttributesCount"] = link.dropped
    encoded["flags"] = _HAS_IS_REMOTE | _IS_REMOTE if link.is_remote else _HAS_IS_REMOTE
    return encoded


def _log(log: CheckedLog) -> dict[str, Any]:
    encoded: dict[str, Any] = {}
    if log.time_ns:
        encoded["timeUnixNano"] = str(log.time_ns)
    if log.severity_number:
        encoded["severityNumber"] = log.severity_number
    if log.severity_text:
        encoded["severityText"] = _text(log.severity_text)
    encoded["body"] = _value(log.body, False)  # the SDK keeps a body as it was given
    if log.attributes:
        attributes = _attributes(log.attributes)
        if attributes:
            encoded["attributes"] = attributes
    if log.dropped_attributes:
        encoded["droppedAttributesCount"] = log.dropped_attributes
    if log.trace_flags:
        encoded["flags"] = log.trace_flags
    if log.trace_id:
        encoded["traceId"] = f"{log.trace_id:032x}"
    if log.span_id:
        encoded["spanId"] = f"{log.span_id:016x}"
    if log.observed_time_ns:
        encoded["observedTimeUnixNano"] = str(log.observed_time_ns)
    if log.event_name:
        encoded["eventName"] = _text(log.event_name)
    return encoded


def _text(text: str) -> str:
    """``text``, if protobuf can carry it (UTF-8: no lone surrogate)."""
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise Unrepresentable("a lone surrogate") from None
    return text


def _attributes(attributes: Mapping[str, Any], clean: bool = True) -> list[dict[str, Any]]:
    """KeyValues, as the SDK cleans attributes (``clean``: ``""`` keys left out) and the
    encoder writes them (an attribute it cannot carry left out)."""
    encoded = []
    for key, value in attributes.items():
        try:
            if type(value) is str and value.isascii() and key.isascii():  # the common case
                if key:
                    encoded.append({"key": key, "value": {"stringValue": value}})
                elif not clean:
                    encoded.append({"value": {"stringValue": value}})
            elif key:
                encoded.append({"key": _text(key), "value": _value(value, clean)})
            elif not clean:
                encoded.append({"value": _value(value, clean)})
        except Unrepresentable:
            continue
    return encoded


def _value(value: Any, clean: bool) -> dict[str, Any]:
    """An AnyValue; ``clean``: mappings without ``""`` keys, as the SDK keeps attributes."""
    kind = type(value)
    if kind is str:
        return {"stringValue": _text(value)}
    if kind is bool:
        return {"boolValue": value}
    if kind is int:
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise Unrepresentable("an integer beyond 64 bits")
        return {"intValue": str(value)}
    if kind is float:
        if value != value:
            return {"doubleValue": "NaN"}
        return {"doubleValue": _NON_FINITE.get(value, value)}
    if value is None:
        return {}
    if kind is bytes:
        return {"bytesValue": base64.b64encode(value).decode()}
    if kind is list or kind is tuple:
        return {"arrayValue": {"values": [_value(v, clean) for v in value]} if value else {}}
    if kind is dict:
        values: list[dict[str, Any]] = []
        for key, item in value.items():
            if not key:
                if clean:
                    continue
                values.append({"value": _value(item, clean)})
            else:
                values.append({"key": _text(key), "value": _value(item, clean)})
        return {"kvlistValue": {"values": values} if values else {}}
    raise Unrepresentable(f"not an AnyValue: {type(value).__qualname__}")
