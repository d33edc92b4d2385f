# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Common Schema 4.0 events (the other OpenTelemetry user_events exporters': Rust, C++,
.NET) and any other EventHeader event, as the reader's checked records.

A decoded :class:`.EventHeaderEvent` whose fields include ``__csver__`` is read by field
name and type, never by position or one writer's release: PartA/PartB/PartC in any order,
PartA's extensions flat (``ext_dt_traceId``) or nested (``ext_dt`` { ``traceId`` }). A
PartB ``_typeName`` of ``Span`` gives a :class:`.CheckedSpan`, anything else a
:class:`.CheckedLog`; an event without ``__csver__`` is a log whose attributes are its
fields. What the writer said of its resource comes beside the record (the join matches
it), and what cannot be rebuilt is left at its default. docs/common-schema.md says which
writer writes what. A record that does not map raises :class:`.InvalidRecord` with one of
:data:`.common_schema_fields.REASONS`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from opentelemetry_exporter_userevents.reader.decode import common_schema_fields as cs
from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    Attributes,
    CheckedLog,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.decode.common_schema_fields import (
    NO_SCOPE,
    AttributeSink,
    Drop,
    safe_text,
    scalar,
    text,
    time_field,
    trace_context,
)
from opentelemetry_exporter_userevents.reader.decode.common_schema_span import build_span
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    EventField,
    EventHeaderEvent,
)
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord

CSVER_FIELD = "__csver__"
ENV_PROPERTIES = "env_properties"
""".NET's PartC field: the log's other attributes as one JSON object."""
_PARTS = ("PartA", "PartB", "PartC")
_DEFAULT_EVENT_NAMES = frozenset({"Log", "Logs"})
"""The writers' event names when the log has none of its own."""
_LEVEL_SEVERITY = {1: 21, 2: 17, 3: 13, 4: 9, 5: 5}
"""EventHeader levels (critical, error, warning, informational, verbose) as severity
numbers (FATAL, ERROR, WARN, INFO, DEBUG): only for events that give none."""

RESOURCE_EXTENSIONS = {
    "ext_cloud_role": "service.name",
    "ext_cloud_roleInstance": "service.instance.id",
    "ext_cloud_roleVer": "service.version",
}
"""PartA fields the writers fill from their resource, back to its attribute names."""
EXCEPTION_EXTENSIONS = {
    "ext_ex_type": "exception.type",
    "ext_ex_msg": "exception.message",
    "ext_ex_stack": "exception.stacktrace",
}
"""PartA fields .NET writes for a log's exception, back to the log's attributes."""
_LOG_PART_B = frozenset({"_typeName", "body", "severityNumber", "severityText", "name", "eventId"})


class CommonSchemaRecord(NamedTuple):
    """A mapped event: its checked record, what its writer said of its resource, and why
    values were left out of either (each also counted in the record's
    ``dropped_attributes``: the resource has no count of its own)."""

    record: CheckedSpan | CheckedLog
    resource: Attributes
    """``service.name`` and the like, from PartA; empty if the event says nothing."""
    dropped: tuple[str, ...]
    """Reasons from :data:`.common_schema_fields.DROP_REASONS`, each once."""


def map_event(
    event: EventHeaderEvent, timestamp: int = 0, pid: int = 0, tracepoint: str = ""
) -> CommonSchemaRecord:
    """``event`` as a checked span or log, with where it came from (as
    :meth:`.RecordChecker.check` sets it). Raises :class:`.InvalidRecord`."""
    csver = [field for field in event.fields if field.name == CSVER_FIELD]
    if not csver:
        return _other(event, timestamp, pid, tracepoint)
    version = csver[0].value
    if len(csver) > 1 or type(version) is not int or version >> 8 != 4:
        raise InvalidRecord(cs.CSVER)
    parts, rest = _parts(event.fields)
    part_a = _fields(_flat_extensions(parts.get("PartA", ())))
    part_b = _fields(parts.get("PartB", ()))
    resource = AttributeSink()
    attributes = AttributeSink()
    for name, value in part_a.items():
        _part_a_field(name, value, resource, attributes)
    if part_b.get("_typeName") == "Span":
        if "PartA" not in parts:
            raise InvalidRecord(cs.SPAN_NO_PART_A)
        record: CheckedSpan | CheckedLog = build_span(part_a, part_b, attributes)
    else:
        record = _log(event, part_a, part_b, attributes)
    for field in parts.get("PartC", ()):
        value = field.value
        if (
            field.name == ENV_PROPERTIES
            and type(value) is str
            and attributes.add_json_object(value)
        ):
            continue  # kept as its text when it is not a JSON object
        attributes.add(safe_text(field.name), value)
    attributes.add_fields(rest)
    attributes.absorb(resource)  # PartA's values left out: a resource has no count of its own
    record = record._replace(
        dropped_attributes=attributes.dropped,
        timestamp=timestamp,
        pid=pid,
        tracepoint=tracepoint,
    )
    return CommonSchemaRecord(record, resource.attributes, tuple(attributes.reasons))


def _other(
    event: EventHeaderEvent, timestamp: int, pid: int, tracepoint: str
) -> CommonSchemaRecord:
    """An EventHeader event of no Common Schema: a log of its fields, named as the event."""
    attributes = AttributeSink()
    attributes.add_fields(event.fields)
    record = CheckedLog(
        time_ns=0,
        observed_time_ns=0,
        trace_id=0,
        span_id=0,
        trace_flags=0,
        severity_number=_LEVEL_SEVERITY.get(event.level, 0),
        severity_text=None,
        event_name=safe_text(event.name),
        body=None,
        attributes=attributes.attributes,
        dropped_attributes=attributes.dropped,
        scope_text=NO_SCOPE,
        scope=None,
        timestamp=timestamp,
        pid=pid,
        tracepoint=tracepoint,
    )
    return CommonSchemaRecord(record, {}, tuple(attributes.reasons))


def _parts(fields: Iterable[EventField]) -> tuple[dict[str, Any], list[EventField]]:
    """PartA/PartB/PartC (each a struct, each at most once) and the other top-level fields
    but ``__csver__``."""
    parts: dict[str, Any] = {}
    rest = []
    for field in fields:
        if field.name in _PARTS:
            if type(field.value) is not tuple:
                raise InvalidRecord(cs.PART_NOT_STRUCT)
            if field.name in parts:
                raise InvalidRecord(cs.PART_REPEATED)
            parts[field.name] = field.value
        elif field.name != CSVER_FIELD:
            rest.append(field)
    return parts, rest


def _flat_extensions(fields: Iterable[EventField]) -> list[EventField]:
    """PartA with nested extensions (``ext_dt`` { ``traceId`` }, older Rust logs) as the
    flat names every writer writes now (``ext_dt_traceId``)."""
    flat = []
    for field in fields:
        if type(field.value) is tuple:
            for member in field.value:
                flat.append(member._replace(name=f"{field.name}_{member.name}"))
        else:
            flat.append(field)
    return flat


def _fields(fields: Iterable[EventField]) -> dict[str, Any]:
    """A part's values by name; a name twice is ambiguous, so refused."""
    values: dict[str, Any] = {}
    for field in fields:
        if field.name in values:
            raise InvalidRecord(cs.FIELD_REPEATED)
        values[field.name] = field.value
    return values


def _part_a_field(
    name: str, value: Any, resource: AttributeSink, attributes: AttributeSink
) -> None:
    if name in ("time", "ext_dt_traceId", "ext_dt_spanId"):
        return  # read by the span or log
    renamed = RESOURCE_EXTENSIONS.get(name)
    if renamed is not None:
        resource.put(renamed, text(value, cs.EXTENSION))
        return
    renamed = EXCEPTION_EXTENSIONS.get(name)
    if renamed is not None:
        attributes.put(renamed, text(value, cs.EXTENSION))
        return
    resource.add(safe_text(name), value)  # .NET's prepopulated fields: the process's own


def _log(
    event: EventHeaderEvent,
    part_a: dict[str, Any],
    part_b: dict[str, Any],
    attributes: AttributeSink,
) -> CheckedLog:
    trace_id, span_id = trace_context(part_a)
    time_ns = time_field(part_a, "time", cs.TIME, None)
    severity = part_b.get("severityNumber", 0)
    if type(severity) is not int or not 0 <= severity <= 24:
        raise InvalidRecord(cs.SEVERITY_NUMBER)
    severity_text = part_b.get("severityText")
    if severity_text is not None and type(severity_text) is not str:
        # Rust before 54e526c2 gave the text a signed-int format: 1, 2, 4 or 8 bytes of
        # it decode as an integer. Only the text is lost.
        attributes.drop(cs.DROP_SEVERITY_TEXT)
        severity_text = None
    event_name = part_b.get("name")
    if event_name is not None:
        event_name = text(event_name, cs.NAME)
    elif event.name not in _DEFAULT_EVENT_NAMES:
        event_name = safe_text(event.name)
    if event_name in _DEFAULT_EVENT_NAMES:  # Rust before 833a92b7 wrote "Log" for none
        event_name = None
    if "eventId" in part_b:
        attributes.add("event_id", part_b["eventId"])
    for key, value in part_b.items():
        if key not in _LOG_PART_B:
            attributes.add(safe_text(key), value)
    return CheckedLog(
        time_ns=time_ns,
        observed_time_ns=0,
        trace_id=trace_id or 0,
        span_id=span_id or 0,
        trace_flags=0,
        severity_number=severity,
        severity_text=None if severity_text is None else safe_text(severity_text),
        event_name=event_name,
        body=_body(part_b.get("body"), attributes),
        attributes=attributes.attributes,
        dropped_attributes=0,
        scope_text=NO_SCOPE,
        scope=None,
    )


def _body(value: Any, attributes: AttributeSink) -> Any:
    """A log body as OTLP holds it: a scalar, a list, or a struct as a map; a value OTLP
    cannot hold is left out (None), its reason counted."""
    if type(value) is tuple:
        body = AttributeSink()
        body.add_fields(value)
        attributes.absorb(body)
        return body.attributes
    try:
        if type(value) is list:
            if value and type(value[0]) is tuple:  # an array of structs: maps
                return [_body(element, attributes) for element in value]
            return [scalar(element) for element in value]
        return None if value is None else scalar(value)
    except Drop as drop:
        attributes.drop(drop.reason)
        return None
