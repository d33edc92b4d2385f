# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader fields as OTLP attribute values, and the reasons a Common Schema event is
refused or loses a value.

A field comes from any process that may write user_events, so each value is taken by its
type, never trusted: an integer OTLP cannot hold (a u64 above 2^63 - 1), a null or a
repeated name drops that one attribute, with a reason from :data:`DROP_REASONS`, and the
record keeps the rest. What makes a whole record unusable (ids, times, a span's name) is
:data:`REASONS`, raised as :class:`.InvalidRecord`. Neither carries the writer's text:
reasons are counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from ipaddress import IPv4Address, IPv6Address
from typing import Any
from uuid import UUID

from opentelemetry_exporter_userevents.abi.binary import S64_MAX, S64_MIN
from opentelemetry_exporter_userevents.reader.decode.checked_records import Attributes
from opentelemetry_exporter_userevents.reader.decode.common_schema_time import parse_time
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import EventField
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord

MAX_JSON_DEPTH = 8
"""JSON objects nested deeper are kept as their JSON text."""
MAX_ATTRIBUTES = 1024
"""Attributes kept for one record (flattened); the rest are dropped and counted."""
NO_SCOPE = "{}"
"""The scope text of a record without scope (as :meth:`.RecordChecker.scope` reads it)."""
HEX32 = re.compile(r"[0-9a-fA-F]{32}", re.ASCII).fullmatch
HEX16 = re.compile(r"[0-9a-fA-F]{16}", re.ASCII).fullmatch

# --- a whole record refused (InvalidRecord) -------------------------------------------
CSVER = "cs.__csver__: not a Common Schema 4 version"
PART_NOT_STRUCT = "cs.part: not a struct"
PART_REPEATED = "cs.part: repeated"
FIELD_REPEATED = "cs.field: repeated"
SPAN_NO_PART_A = "cs.span: no PartA"
TIME = "cs.PartA.time: not an RFC 3339 time"
TIME_MISSING = "cs.PartA.time: missing"
START_TIME = "cs.PartB.startTime: not an RFC 3339 time"
START_TIME_MISSING = "cs.PartB.startTime: missing"
TRACE_ID = "cs.PartA.ext_dt_traceId: not hex of the right length"
TRACE_ID_MISSING = "cs.PartA.ext_dt_traceId: missing"
TRACE_ID_ZERO = "cs.PartA.ext_dt_traceId: an invalid (all-zero) id"
SPAN_ID = "cs.PartA.ext_dt_spanId: not hex of the right length"
SPAN_ID_MISSING = "cs.PartA.ext_dt_spanId: missing"
SPAN_ID_ZERO = "cs.PartA.ext_dt_spanId: an invalid (all-zero) id"
PARENT_ID = "cs.PartB.parentId: not hex of the right length"
NAME = "cs.PartB.name: not a string"
NAME_MISSING = "cs.PartB.name: missing"
KIND = "cs.PartB.kind: not an integer 0 to 4"
SUCCESS = "cs.PartB.success: not a boolean"
STATUS_MESSAGE = "cs.PartB.statusMessage: not a string"
LINKS = "cs.PartB.links: not a JSON list of links"
SEVERITY_NUMBER = "cs.PartB.severityNumber: not an integer 0 to 24"
EXTENSION = "cs.PartA.ext: not a string"

REASONS = frozenset(
    {
        CSVER,
        PART_NOT_STRUCT,
        PART_REPEATED,
        FIELD_REPEATED,
        SPAN_NO_PART_A,
        TIME,
        TIME_MISSING,
        START_TIME,
        START_TIME_MISSING,
        TRACE_ID,
        TRACE_ID_MISSING,
        TRACE_ID_ZERO,
        SPAN_ID,
        SPAN_ID_MISSING,
        SPAN_ID_ZERO,
        PARENT_ID,
        NAME,
        NAME_MISSING,
        KIND,
        SUCCESS,
        STATUS_MESSAGE,
        LINKS,
        SEVERITY_NUMBER,
        EXTENSION,
    }
)
"""Every reason a Common Schema or other EventHeader event is refused for."""

# --- one value dropped, the record kept -----------------------------------------------
DROP_BIG_INTEGER = "cs.attribute: an integer OTLP cannot hold"
DROP_NULL = "cs.attribute: a null value"
DROP_REPEATED = "cs.attribute: a repeated name"
DROP_TOO_MANY = "cs.attribute: past the attribute bound"
DROP_SEVERITY_TEXT = "cs.PartB.severityText: not a string"

DROP_REASONS = frozenset(
    {DROP_BIG_INTEGER, DROP_NULL, DROP_REPEATED, DROP_TOO_MANY, DROP_SEVERITY_TEXT}
)
"""Every reason one value is left out of a record that is kept."""


def trace_context(part_a: dict[str, Any]) -> tuple[int | None, int | None]:
    """PartA's trace and span ids (None where absent)."""
    trace_id = part_a.get("ext_dt_traceId")
    span_id = part_a.get("ext_dt_spanId")
    return (
        None if trace_id is None else hex_id(trace_id, HEX32, TRACE_ID),
        None if span_id is None else hex_id(span_id, HEX16, SPAN_ID),
    )


def hex_id(value: Any, match: Callable[[str], Any], reason: str) -> int:
    if type(value) is not str or match(value) is None:
        raise InvalidRecord(reason)
    return int(value, 16)


def text(value: Any, reason: str) -> str:
    if type(value) is not str:
        raise InvalidRecord(reason)
    return safe_text(value)


def time_field(part: dict[str, Any], name: str, reason: str, missing: str | None) -> int:
    """A time field in nanoseconds; 0 when absent and allowed (``missing`` None)."""
    value = part.get(name)
    if value is None:
        if missing is not None:
            raise InvalidRecord(missing)
        return 0
    time_ns = parse_time(value) if type(value) is str else None
    if time_ns is None:
        raise InvalidRecord(reason)
    return time_ns


class Drop(ValueError):
    """A value OTLP cannot carry: its attribute is left out (one of :data:`DROP_REASONS`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def safe_text(text: str) -> str:
    """``text`` as UTF-8 can carry it: unpaired surrogates (which the EventHeader decoder
    keeps, as the C++ one does) become U+FFFD, so no encoder past the boundary fails."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def scalar(value: Any) -> Any:
    """A decoded scalar as an attribute value; raises :class:`Drop`."""
    kind = type(value)
    if kind is bool or kind is float or kind is bytes:
        return value
    if kind is int:
        if not S64_MIN <= value <= S64_MAX:
            raise Drop(DROP_BIG_INTEGER)
        return value
    if kind is str:
        return safe_text(value)
    if value is None:
        raise Drop(DROP_NULL)
    if isinstance(value, (UUID, IPv4Address, IPv6Address)):
        return str(value)
    raise Drop(DROP_NULL)  # no other scalar comes out of the decoder


class AttributeSink:
    """Builds one record's attributes: flattens structs (``outer.inner``) and arrays of
    structs (``outer.0.inner``), keeps the first of a repeated name, and counts what it
    leaves out (at most :data:`MAX_ATTRIBUTES` kept)."""

    def __init__(self, attributes: Attributes | None = None) -> None:
        self.attributes: Attributes = {} if attributes is None else attributes
        self.dropped = 0
        self.reasons: list[str] = []

    def drop(self, reason: str) -> None:
        self.dropped += 1
        if reason not in self.reasons:
            self.reasons.append(reason)

    def absorb(self, other: AttributeSink) -> None:
        """Counts what ``other`` (a log body's map, the resource from PartA) left out as
        this record's."""
        self.dropped += other.dropped
        self.reasons += [reason for reason in other.reasons if reason not in self.reasons]

    def put(self, name: str, value: Any) -> None:
        """One attribute, already an attribute value."""
        if name in self.attributes:
            self.drop(DROP_REPEATED)
        elif len(self.attributes) >= MAX_ATTRIBUTES:
            self.drop(DROP_TOO_MANY)
        else:
            self.attributes[name] = value

    def add_fields(self, fields: Iterable[EventField], prefix: str = "") -> None:
        for field in fields:
            self.add(prefix + safe_text(field.name), field.value)

    def add(self, name: str, value: Any) -> None:
        """A decoded value under ``name``, flattened if it is a struct."""
        if type(value) is tuple:  # a struct: its fields
            self.add_fields(value, name + ".")
            return
        if type(value) is list:
            if value and type(value[0]) is tuple:  # an array of structs
                for index, element in enumerate(value):
                    self.add_fields(element, f"{name}.{index}.")
                return
            try:
                self.put(name, [scalar(element) for element in value])
            except Drop as drop:
                self.drop(drop.reason)
            return
        try:
            self.put(name, scalar(value))
        except Drop as drop:
            self.drop(drop.reason)

    def add_json_object(self, text: str) -> bool:
        """The members of a JSON object text (.NET's ``env_properties``) as attributes,
        nested objects flattened; False, adding nothing, if it is not a JSON object."""
        try:
            members = json.loads(text)
        except (ValueError, RecursionError):
            return False
        if type(members) is not dict:
            return False
        self._add_json(members, "", 0)
        return True

    def _add_json(self, members: dict[str, Any], prefix: str, depth: int) -> None:
        for key, value in members.items():
            name = prefix + safe_text(key)
            if type(value) is dict and depth < MAX_JSON_DEPTH:
                self._add_json(value, name + ".", depth + 1)
                continue
            if type(value) is dict or (type(value) is list and not _one_scalar_type(value)):
                value = json.dumps(value)  # the SDK keeps no maps, nor lists of mixed types
            self.add(name, value)


def _one_scalar_type(values: list[Any]) -> bool:
    kinds = {type(value) for value in values}
    return len(kinds) <= 1 and not kinds & {dict, list, type(None)}
