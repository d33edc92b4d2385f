# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader's numbers (the wire contract, from record.eventheader, importable here as
before), the decoder's bounds, its error and what it gives.

EventHeader is Microsoft's convention for user_events (``libeventheader-tracepoint``'s
``eventheader.h``, LinuxTracepoints 1.4.0): other OpenTelemetry exporters write it, so the
reader decodes it. The bounds are ours.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address
from typing import NamedTuple, TypeAlias
from uuid import UUID

from opentelemetry_exporter_userevents.record.eventheader import (
    ENCODING_CARRAY,
    ENCODING_CHAIN,
    ENCODING_MASK,
    ENCODING_VARRAY,
    EXTENSION_CHAIN,
    EXTENSION_HEADER_SIZE,
    EXTENSION_KIND_MASK,
    FORMAT_CHAIN,
    FORMAT_MASK,
    HEADER_SIZE,
    KNOWN_FLAGS,
    NAME_MAX,
    Encoding,
    ExtensionKind,
    Format,
    HeaderFlags,
    Opcode,
)

__all__ = [
    "Attributes",
    "BAD_ACTIVITY_ID",
    "BAD_ARRAY_FLAGS",
    "BAD_ENCODING",
    "BAD_FIELD_COUNT",
    "BAD_TRACEPOINT_NAME",
    "DUPLICATE_METADATA",
    "EMPTY_ARRAY",
    "EMPTY_STRUCT",
    "ENCODING_CARRAY",
    "ENCODING_CHAIN",
    "ENCODING_MASK",
    "ENCODING_VARRAY",
    "EXTENSION_CHAIN",
    "EXTENSION_HEADER_SIZE",
    "EXTENSION_KIND_MASK",
    "Encoding",
    "EventField",
    "EventHeaderError",
    "EventHeaderEvent",
    "ExtensionKind",
    "FORMAT_CHAIN",
    "FORMAT_MASK",
    "Format",
    "HEADER_SIZE",
    "HeaderFlags",
    "INVALID_EXTENSION",
    "KNOWN_FLAGS",
    "LEVEL_MISMATCH",
    "MAX_METADATA_FIELDS",
    "MAX_STRUCT_DEPTH",
    "MAX_TOP_LEVEL_FIELDS",
    "MAX_VALUES",
    "NAME_MAX",
    "NOT_EVENTHEADER",
    "NO_METADATA",
    "Opcode",
    "REASONS",
    "Scalar",
    "TOO_DEEP",
    "TOO_MANY_VALUES",
    "TRUNCATED_EXTENSION",
    "TRUNCATED_FIELD",
    "TRUNCATED_HEADER",
    "TRUNCATED_VALUE",
    "TracepointName",
    "UNKNOWN_FLAGS",
    "UNTERMINATED_EVENT_NAME",
    "Value",
]

MAX_STRUCT_DEPTH = 8
"""Structs nest at most this deep (the C++ EventEnumerator's stack); deeper metadata is
refused, even where no payload reaches it."""
MAX_TOP_LEVEL_FIELDS = 255
"""Fields outside any struct (the C++ decoder's limit too)."""
MAX_METADATA_FIELDS = 4096
"""Field descriptors in one event's metadata (each takes at least 2 of its at most 65535
bytes; no real event has more than a few dozen)."""
MAX_VALUES = 65536
"""Values, arrays and struct instances decoded from one event. Every value takes at least
one payload byte, and a struct at least one value, so decoding is linear in the record's
size; the exception, a struct whose fields the metadata cut short (empty, taking no
bytes, yet repeatable 65535 times in an array), is what this bound caps."""


class EventHeaderError(ValueError):
    """A record that is not a well-formed EventHeader event."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        """One of :data:`REASONS` (never the record's own text: reasons are counted)."""


NOT_EVENTHEADER = "eventheader: not an EventHeader tracepoint"
TRUNCATED_HEADER = "eventheader: truncated header"
UNKNOWN_FLAGS = "eventheader: unknown header flags"
BAD_TRACEPOINT_NAME = "eventheader: bad tracepoint name"
LEVEL_MISMATCH = "eventheader: level differs from the tracepoint name's"
TRUNCATED_EXTENSION = "eventheader: truncated extension"
INVALID_EXTENSION = "eventheader: invalid extension kind"
DUPLICATE_METADATA = "eventheader: two metadata extensions"
BAD_ACTIVITY_ID = "eventheader: bad activity id extension"
NO_METADATA = "eventheader: no metadata extension"
UNTERMINATED_EVENT_NAME = "eventheader: metadata: event name not terminated"
TRUNCATED_FIELD = "eventheader: metadata: truncated field"
BAD_ENCODING = "eventheader: metadata: unknown encoding"
BAD_ARRAY_FLAGS = "eventheader: metadata: both array flags"
EMPTY_ARRAY = "eventheader: metadata: constant-length array of 0"
EMPTY_STRUCT = "eventheader: metadata: struct of 0 fields"
TOO_DEEP = "eventheader: metadata: structs nested too deep"
BAD_FIELD_COUNT = "eventheader: metadata: bad field count"
TRUNCATED_VALUE = "eventheader: payload: truncated value"
TOO_MANY_VALUES = "eventheader: payload: too many values"

REASONS = frozenset(
    {
        NOT_EVENTHEADER,
        TRUNCATED_HEADER,
        UNKNOWN_FLAGS,
        BAD_TRACEPOINT_NAME,
        LEVEL_MISMATCH,
        TRUNCATED_EXTENSION,
        INVALID_EXTENSION,
        DUPLICATE_METADATA,
        BAD_ACTIVITY_ID,
        NO_METADATA,
        UNTERMINATED_EVENT_NAME,
        TRUNCATED_FIELD,
        BAD_ENCODING,
        BAD_ARRAY_FLAGS,
        EMPTY_ARRAY,
        EMPTY_STRUCT,
        TOO_DEEP,
        BAD_FIELD_COUNT,
        TRUNCATED_VALUE,
        TOO_MANY_VALUES,
    }
)
"""Every reason :class:`EventHeaderError` gives."""

Attributes = tuple[tuple[str, str], ...]
"""``;name=value`` attributes of an event or field name, in order."""

Scalar: TypeAlias = int | float | bool | str | bytes | UUID | IPv4Address | IPv6Address | None
"""A value with its format applied (None: a length-0 value of a fixed-size format)."""
Value: TypeAlias = "Scalar | tuple[EventField, ...] | list[Value]"
"""A scalar, a struct (its fields) or an array (its elements)."""


class EventField(NamedTuple):
    """One field of an event (a named tuple: events have many)."""

    name: str
    value: Value
    encoding: Encoding
    """Without its array flags."""
    format: int
    """As declared (a :class:`Format` or an unknown value); says how to show an int: hex,
    errno, pid, seconds since 1970, port."""
    tag: int
    """Provider-defined, 0 if none."""
    attributes: Attributes = ()
    array: bool = False


class TracepointName(NamedTuple):
    """``<provider>_L<level>K<keyword>[<options>]`` (eventheader.h, Tracepoint Names)."""

    provider: str
    level: int
    keyword: int
    options: str
    """Each an uppercase letter then digits and lowercase letters, e.g. ``Gmygroup``."""

    @property
    def group(self) -> str | None:
        """The ``G`` option's value: the provider group."""
        for option in _options(self.options):
            if option[0] == "G":
                return option[1:]
        return None


def _options(options: str) -> list[str]:
    starts = [i for i, ch in enumerate(options) if "A" <= ch <= "Z"] + [len(options)]
    return [options[a:b] for a, b in zip(starts, starts[1:], strict=False)]


class EventHeaderEvent(NamedTuple):
    """A decoded EventHeader event."""

    tracepoint: TracepointName
    name: str
    attributes: Attributes
    flags: int
    version: int
    id: int
    tag: int
    opcode: int
    level: int
    activity_id: bytes | None
    related_activity_id: bytes | None
    fields: tuple[EventField, ...]

    @property
    def provider(self) -> str:
        return self.tracepoint.provider

    @property
    def keyword(self) -> int:
        return self.tracepoint.keyword

    @property
    def big_endian(self) -> bool:
        return not self.flags & HeaderFlags.LITTLE_ENDIAN
