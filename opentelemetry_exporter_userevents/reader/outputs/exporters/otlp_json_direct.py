# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OTLP/JSON straight from checked records: the ``ExportTraceServiceRequest`` and
``ExportLogsServiceRequest`` lines :mod:`.otlp_json` makes from SDK objects (the OTLP
exporters' encoder, protobuf's JSON mapping, then ``json.dumps``), written as text without
any of them: the same text, key order included.

Each record comes joined to the SDK ``Resource`` and ``InstrumentationScope`` objects the
:class:`~.join_stage.JoinStage` keeps (one per distinct resource and scope): they group the
records exactly as the encoder groups them (:mod:`.grouping`), and their encoded form is
made once, not per record. A record a worker encoded (:class:`.EncodedRecord`, made with
:func:`span_item` or :func:`log_item` where it was decoded) comes with its item. Everything
else is written from the checked values, as the SDK would have kept them and the encoder
written them:

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
does. ``tests/reader/outputs/test_otlp_json_direct.py`` proves the two equal over every value
kind, with the installed encoder (opentelemetry-exporter-otlp-proto-common): one that writes
anything differently fails it.
"""

from __future__ import annotations

import base64
import json
import math
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

_NON_FINITE = {math.inf: '{"doubleValue":"Infinity"}', -math.inf: '{"doubleValue":"-Infinity"}'}
_quote: Callable[[str], str] = json.encoder.encode_basestring_ascii
"""A str as ``json.dumps`` writes it (ASCII: other characters escaped)."""
_float = float.__repr__
"""A finite float as ``json.dumps`` writes it."""


def spans_line(
    records: Iterable[JoinedRecord], cache: EncodedCache[str] | None = None
) -> tuple[str | None, int]:
    """An ExportTraceServiceRequest of checked spans (or workers' encoded ones), as
    ``otlp_json.dumps`` writes what :func:`.otlp_json.spans_request` makes of their SDK
    objects; None if none could be written; and how many were left out."""
    return _line(records, _span_or_item, "resourceSpans", "scopeSpans", "spans", cache)


def logs_line(
    records: Iterable[JoinedRecord], cache: EncodedCache[str] | None = None
) -> tuple[str | None, int]:
    """An ExportLogsServiceRequest of checked logs (or workers' encoded ones), as
    ``otlp_json.dumps`` writes what :func:`.otlp_json.logs_request` makes of their SDK
    objects; None if none could be written; and how many were left out."""
    return _line(records, _log_or_item, "resourceLogs", "scopeLogs", "logRecords", cache)


def _span_or_item(record: CheckedSpan | CheckedLog | EncodedRecord) -> str:
    if type(record) is CheckedSpan:
        return span_item(record)
    return _encoded(record)


def _log_or_item(record: CheckedSpan | CheckedLog | EncodedRecord) -> str:
    if type(record) is CheckedLog:
        return log_item(record)
    return _encoded(record)


def _encoded(record: CheckedSpan | CheckedLog | EncodedRecord) -> str:
    """A worker's item (a record of the other kind: a caller's mistake, left out)."""
    if type(record) is EncodedRecord and type(record.item) is str:
        return record.item
    raise Unrepresentable("OTLP cannot carry it, or not of this request's kind")


def _line(
    records: Iterable[JoinedRecord],
    encode: Callable[[Any], str],
    resources_key: str,
    scopes_key: str,
    items_key: str,
    cache: EncodedCache[str] | None,
) -> tuple[str | None, int]:
    groups, failed = grouped(records, encode, _resource, _scope, cache or EncodedCache[str]())
    if not groups:
        return None, failed
    resource_items = []
    for resource_of in groups:
        scope_items = []
        for scope_of in resource_of.used:
            url = scope_of.first.schema_url if scope_of.first is not None else None
            scope_items.append(
                f'{{"scope":{scope_of.encoded},"{items_key}":[{",".join(scope_of.items)}]'
                + (f',"schemaUrl":{_quote(url)}}}' if url else "}")
            )
        url = resource_of.first.schema_url
        resource_items.append(
            f'{{"resource":{resource_of.encoded},"{scopes_key}":[{",".join(scope_items)}]'
            + (f',"schemaUrl":{_quote(url)}}}' if url else "}")
        )
    return f'{{"{resources_key}":[{",".join(resource_items)}]}}', failed


def _resource(resource: Resource) -> str:
    _text(resource.schema_url)
    attributes = _attributes(resource.attributes, clean=False)  # the SDK cleaned them
    return f'{{"attributes":[{attributes}]}}' if attributes else "{}"


def _scope(scope: InstrumentationScope | None) -> str:
    if scope is None:
        return "{}"
    _text(scope.schema_url or "")
    parts = []
    if scope.name:
        parts.append(f'"name":{_quote(_text(scope.name))}')
    if scope.version:
        parts.append(f'"version":{_quote(_text(scope.version))}')
    attributes = _attributes(scope.attributes or {}, clean=False)
    if attributes:
        parts.append(f'"attributes":[{attributes}]')
    return "{" + ",".join(parts) + "}"


def span_item(span: CheckedSpan) -> str:
    """A span's item in a ``spans`` list (raises :class:`.Unrepresentable` where the
    encoder would refuse the span)."""
    parts = [f'{{"traceId":"{span.trace_id:032x}","spanId":"{span.span_id:016x}"']
    if span.trace_state:
        trace_state = ",".join(f"{k}={v}" for k, v in span.trace_state)
        parts.append(f',"traceState":{_quote(_text(trace_state))}')
    flags = CONTEXT_HAS_IS_REMOTE_MASK
    if span.parent_span_id is not None:
        parts.append(f',"parentSpanId":"{span.parent_span_id:016x}"')
        if span.parent_is_remote:
            flags |= CONTEXT_IS_REMOTE_MASK
    if span.name:
        parts.append(f',"name":{_quote(_text(span.name))}')
    # SpanKind.INTERNAL (0) is SPAN_KIND_INTERNAL (1), and so on.
    parts.append(f',"kind":{span.kind + 1}')
    if span.start_time_ns:
        parts.append(f',"startTimeUnixNano":"{span.start_time_ns}"')
    if span.end_time_ns:
        parts.append(f',"endTimeUnixNano":"{span.end_time_ns}"')
    if span.attributes:
        attributes = _attributes(span.attributes)
        if attributes:
            parts.append(f',"attributes":[{attributes}]')
    if span.dropped_attributes:
        parts.append(f',"droppedAttributesCount":{span.dropped_attributes}')
    if span.events:
        parts.append(f',"events":[{",".join([_event(event) for event in span.events])}]')
    if span.dropped_events:
        parts.append(f',"droppedEventsCount":{span.dropped_events}')
    if span.links:
        parts.append(f',"links":[{",".join([_link(link) for link in span.links])}]')
    if span.dropped_links:
        parts.append(f',"droppedLinksCount":{span.dropped_links}')
    code = span.status_code
    if code == 2 and span.status_description:  # the SDK keeps a description for ERROR
        parts.append(f',"status":{{"message":{_quote(_text(span.status_description))},"code":2}}')
    elif code:
        parts.append(f',"status":{{"code":{code}}}')
    else:
        parts.append(',"status":{}')
    parts.append(f',"flags":{flags}}}')
    return "".join(parts)


def _event(event: CheckedEvent) -> str:
    parts = []
    if event.time_ns:
        parts.append(f'"timeUnixNano":"{event.time_ns}"')
    if event.name:
        parts.append(f'"name":{_quote(_text(event.name))}')
    if event.attributes:
        attributes = _attributes(event.attributes)
        if attributes:
            parts.append(f'"attributes":[{attributes}]')
    if event.dropped:
        parts.append(f'"droppedAttributesCount":{event.dropped}')
    return "{" + ",".join(parts) + "}"


def _link(link: CheckedLink) -> str:
    # The encoder writes no trace state for a link.
    parts = [f'{{"traceId":"{link.trace_id:032x}","spanId":"{link.span_id:016x}"']
    if link.attributes:
        attributes = _attributes(link.attributes)
        if attributes:
            parts.append(f',"attributes":[{attributes}]')
    if link.dropped:
        parts.append(f',"droppedAttributesCount":{link.dropped}')
    flags = (
        CONTEXT_HAS_IS_REMOTE_MASK | CONTEXT_IS_REMOTE_MASK
        if link.is_remote
        else CONTEXT_HAS_IS_REMOTE_MASK
    )
    parts.append(f',"flags":{flags}}}')
    return "".join(parts)


def log_item(log: CheckedLog) -> str:
    """A log's item in a ``logRecords`` list (raises :class:`.Unrepresentable` where the
    encoder would refuse the log)."""
    parts = []
    if log.time_ns:
        parts.append(f'"timeUnixNano":"{log.time_ns}"')
    if log.severity_number:
        parts.append(f'"severityNumber":{log.severity_number}')
    if log.severity_text:
        parts.append(f'"severityText":{_quote(_text(log.severity_text))}')
    parts.append(f'"body":{_value(log.body, False)}')  # the SDK keeps a body as given
    if log.attributes:
        attributes = _attributes(log.attributes)
        if attributes:
            parts.append(f'"attributes":[{attributes}]')
    if log.dropped_attributes:
        parts.append(f'"droppedAttributesCount":{log.dropped_attributes}')
    if log.trace_flags:
        parts.append(f'"flags":{log.trace_flags}')
    if log.trace_id:
        parts.append(f'"traceId":"{log.trace_id:032x}"')
    if log.span_id:
        parts.append(f'"spanId":"{log.span_id:016x}"')
    if log.observed_time_ns:
        parts.append(f'"observedTimeUnixNano":"{log.observed_time_ns}"')
    if log.event_name:
        parts.append(f'"eventName":{_quote(_text(log.event_name))}')
    return "{" + ",".join(parts) + "}"


def _text(text: str) -> str:
    """``text``, if protobuf can carry it (UTF-8: no lone surrogate)."""
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise Unrepresentable("a lone surrogate") from None
    return text


def _attributes(attributes: Mapping[str, Any], clean: bool = True) -> str:
    """KeyValues, comma-separated, as the SDK cleans attributes (``clean``: ``""`` keys left
    out) and the encoder writes them (an attribute it cannot carry left out)."""
    encoded = []
    for key, value in attributes.items():
        try:
            kind = type(value)
            if kind is str and value.isascii() and key.isascii():  # the common cases
                if key:
                    encoded.append(
                        f'{{"key":{_quote(key)},"value":{{"stringValue":{_quote(value)}}}}}'
                    )
                elif not clean:
                    encoded.append(f'{{"value":{{"stringValue":{_quote(value)}}}}}')
            elif kind is int and key and key.isascii() and S64_MIN <= value <= S64_MAX:
                encoded.append(f'{{"key":{_quote(key)},"value":{{"intValue":"{value}"}}}}')
            elif key:
                encoded.append(f'{{"key":{_quote(_text(key))},"value":{_value(value, clean)}}}')
            elif not clean:
                encoded.append(f'{{"value":{_value(value, clean)}}}')
        except Unrepresentable:
            continue
    return ",".join(encoded)


def _value(value: Any, clean: bool) -> str:
    """An AnyValue; ``clean``: mappings without ``""`` keys, as the SDK keeps attributes."""
    kind = type(value)
    if kind is str:
        return f'{{"stringValue":{_quote(_text(value))}}}'
    if kind is bool:
        return '{"boolValue":true}' if value else '{"boolValue":false}'
    if kind is int:
        if not S64_MIN <= value <= S64_MAX:
            raise Unrepresentable("an integer beyond 64 bits")
        return f'{{"intValue":"{value}"}}'
    if kind is float:
        if value != value:
            return '{"doubleValue":"NaN"}'
        non_finite = _NON_FINITE.get(value)
        return non_finite or f'{{"doubleValue":{_float(value)}}}'
    if value is None:
        return "{}"
    if kind is bytes:
        return f'{{"bytesValue":"{base64.b64encode(value).decode()}"}}'
    if kind is list or kind is tuple:
        if not value:
            return '{"arrayValue":{}}'
        return f'{{"arrayValue":{{"values":[{",".join([_value(v, clean) for v in value])}]}}}}'
    if kind is dict:
        values = []
        for key, item in value.items():
            if key:
                values.append(f'{{"key":{_quote(_text(key))},"value":{_value(item, clean)}}}')
            elif not clean:
                values.append(f'{{"value":{_value(item, clean)}}}')
        if not values:
            return '{"kvlistValue":{}}'
        return f'{{"kvlistValue":{{"values":[{",".join(values)}]}}}}'
    raise Unrepresentable(f"not an AnyValue: {type(value).__qualname__}")
