# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader events (the user_events convention of other OpenTelemetry exporters:
Rust, C++, .NET) decoded from a record's bytes and its tracepoint's name.

A pure decoder: bytes in, an :class:`EventHeaderEvent` out, or one
:class:`EventHeaderError` with a reason from a fixed vocabulary; it reads no files and
knows nothing of tracefs. It follows the C++ EventEnumerator of LinuxTracepoints
(``libeventheader-decode-cpp``): the 8-byte header, its extension blocks (metadata,
activity ids; others skipped), then the payload as the metadata describes it. A record
comes from a process that may write user_events, not from us: every size is checked
before it is used, struct nesting and value counts are bounded
(:mod:`.eventheader_types`), and decoding is linear in the record's size. Trailing bytes
after the last field (ring-buffer padding) are ignored, as the C++ decoder ignores them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from opentelemetry_exporter_userevents.abi.format import EventFormat
from opentelemetry_exporter_userevents.reader.decode.eventheader_metadata import (
    FieldDef,
    parse_metadata,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_name import (
    parse_tracepoint_name,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    BAD_ACTIVITY_ID,
    DUPLICATE_METADATA,
    ENCODING_VARRAY,
    EXTENSION_CHAIN,
    EXTENSION_HEADER_SIZE,
    EXTENSION_KIND_MASK,
    HEADER_SIZE,
    INVALID_EXTENSION,
    KNOWN_FLAGS,
    LEVEL_MISMATCH,
    MAX_VALUES,
    NO_METADATA,
    NOT_EVENTHEADER,
    TOO_MANY_VALUES,
    TRUNCATED_EXTENSION,
    TRUNCATED_HEADER,
    TRUNCATED_VALUE,
    UNKNOWN_FLAGS,
    Encoding,
    EventField,
    EventHeaderError,
    EventHeaderEvent,
    ExtensionKind,
    HeaderFlags,
    Scalar,
    TracepointName,
    Value,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_values import (
    FIXED_SIZES,
    LENGTH16_UNITS,
    ZSTRING_UNITS,
    fixed_array,
    fixed_value,
    string_value,
)

FLAGS_FIELD = "eventheader_flags"
"""The first field of an EventHeader tracepoint's format (``EVENTHEADER_COMMAND_TYPES``)."""

_TERMINATORS = {1: b"\0", 2: b"\0\0", 4: b"\0\0\0\0"}


def eventheader_offset(fmt: EventFormat) -> int | None:
    """Where the event header starts in a record of ``fmt``'s tracepoint, if it is an
    EventHeader one (its first field after the common ones is ``eventheader_flags``, as
    the C++ decoder checks); else None."""
    if not fmt.fields or fmt.fields[0].name != FLAGS_FIELD:
        return None
    return fmt.fields[0].offset


def decode_record(fmt: EventFormat, record: bytes | bytearray | memoryview) -> EventHeaderEvent:
    """The event in a whole record (common fields first) of ``fmt``'s tracepoint: a ring
    buffer's record or a perf sample's raw data. Raises :class:`EventHeaderError`."""
    offset = eventheader_offset(fmt)
    if offset is None:
        raise EventHeaderError(NOT_EVENTHEADER)
    return decode_event(fmt.name, record[offset:])


def decode_event(
    tracepoint: str | TracepointName, data: bytes | bytearray | memoryview
) -> EventHeaderEvent:
    """The event in ``data`` (a record's bytes from its event header on) of the tracepoint
    named ``tracepoint`` (without its system; or parsed already, by
    :func:`.parse_tracepoint_name`). Raises :class:`EventHeaderError`."""
    data = bytes(data)
    if len(data) < HEADER_SIZE:
        raise EventHeaderError(TRUNCATED_HEADER)
    flags = data[0]
    if flags & ~KNOWN_FLAGS:
        raise EventHeaderError(UNKNOWN_FLAGS)
    big = not flags & HeaderFlags.LITTLE_ENDIAN
    order: Literal["big", "little"] = "big" if big else "little"
    name = parse_tracepoint_name(tracepoint) if isinstance(tracepoint, str) else tracepoint
    if name.level != data[7]:
        raise EventHeaderError(LEVEL_MISMATCH)
    pos = HEADER_SIZE
    meta = activity = None
    if flags & HeaderFlags.EXTENSION:
        for kind, start, end in _extensions(data, order):
            if kind == ExtensionKind.INVALID:
                raise EventHeaderError(INVALID_EXTENSION)
            if kind == ExtensionKind.METADATA:
                if meta is not None:
                    raise EventHeaderError(DUPLICATE_METADATA)
                meta = data[start:end]
            elif kind == ExtensionKind.ACTIVITY_ID:
                if activity is not None or end - start not in (16, 32):
                    raise EventHeaderError(BAD_ACTIVITY_ID)
                activity = data[start:end]
            pos = end
    if meta is None:
        raise EventHeaderError(NO_METADATA)
    metadata = parse_metadata(meta, big)
    fields = _Payload(data, pos, big).fields(metadata.fields)
    return EventHeaderEvent(
        name,
        metadata.name,
        metadata.attributes,
        flags,
        data[1],
        int.from_bytes(data[2:4], order),
        int.from_bytes(data[4:6], order),
        data[6],
        data[7],
        activity[:16] if activity else None,
        activity[16:] if activity and len(activity) == 32 else None,
        fields,
    )


def _extensions(data: bytes, order: Literal["big", "little"]) -> Iterator[tuple[int, int, int]]:
    """(kind, start, end) of each extension block, while the chain bit says one follows."""
    pos = HEADER_SIZE
    chained = True
    while chained:
        if len(data) - pos < EXTENSION_HEADER_SIZE:
            raise EventHeaderError(TRUNCATED_EXTENSION)
        size = int.from_bytes(data[pos : pos + 2], order)
        kind = int.from_bytes(data[pos + 2 : pos + 4], order)
        pos += EXTENSION_HEADER_SIZE
        if len(data) - pos < size:
            raise EventHeaderError(TRUNCATED_EXTENSION)
        yield kind & EXTENSION_KIND_MASK, pos, pos + size
        pos += size
        chained = bool(kind & EXTENSION_CHAIN)


class _Payload:
    """Walks the payload by the metadata's tree, counting what it makes."""

    def __init__(self, data: bytes, pos: int, big: bool) -> None:
        self.data = data
        self.pos = pos
        self.big = big
        self.order: Literal["big", "little"] = "big" if big else "little"
        self.budget = MAX_VALUES

    def _spend(self, count: int) -> None:
        self.budget -= count
        if self.budget < 0:
            raise EventHeaderError(TOO_MANY_VALUES)

    def _take(self, size: int) -> bytes:
        if len(self.data) - self.pos < size:
            raise EventHeaderError(TRUNCATED_VALUE)
        self.pos += size
        return self.data[self.pos - size : self.pos]

    def fields(self, defs: tuple[FieldDef, ...]) -> tuple[EventField, ...]:
        return tuple([self._field(field) for field in defs])

    def _field(self, field: FieldDef) -> EventField:
        self._spend(1)
        value: Value
        if not field.array:
            value = self._one(field)
        else:
            count = field.length
            if field.array == ENCODING_VARRAY:
                count = int.from_bytes(self._take(2), self.order)
            value = self._array(field, count)
        return EventField(
            field.name,
            value,
            field.encoding,
            field.format,
            field.tag,
            field.attributes,
            bool(field.array),
        )

    def _array(self, field: FieldDef, count: int) -> list[Value]:
        size = FIXED_SIZES.get(field.encoding)
        if size is None:  # structs and strings: each element read and counted in turn
            elements: list[Value] = []
            for _ in range(count):
                self._spend(1)
                elements.append(self._one(field))
            return elements
        raw = self._take(size * count)  # checked whole before any is made
        self._spend(count)
        return fixed_array(field.format, raw, size, self.big)

    def _one(self, field: FieldDef) -> Value:
        if field.encoding == Encoding.STRUCT:
            return self.fields(field.children)
        return self._scalar(field)

    def _scalar(self, field: FieldDef) -> Scalar:
        encoding = field.encoding
        size = FIXED_SIZES.get(encoding)
        if size is not None:
            return fixed_value(field.format, self._take(size), self.big)
        unit = LENGTH16_UNITS.get(encoding)
        if unit is not None:
            length = int.from_bytes(self._take(2), self.order)
            raw = self._take(length * unit)
        else:
            raw = self._zstring(ZSTRING_UNITS[encoding])
        return string_value(encoding, field.format, raw, self.big)

    def _zstring(self, unit: int) -> bytes:
        """The units up to the first zero unit, which must be there (and is skipped)."""
        data, start = self.data, self.pos
        terminator = _TERMINATORS[unit]
        at = data.find(terminator, start)
        while at >= 0 and (at - start) % unit:  # a zero unit starts a whole unit on
            at = data.find(terminator, at + 1)
        if at < 0:
            raise EventHeaderError(TRUNCATED_VALUE)
        self.pos = at + unit
        return data[start:at]


__all__ = [
    "Encoding",
    "EventField",
    "EventHeaderError",
    "EventHeaderEvent",
    "TracepointName",
    "decode_event",
    "decode_record",
    "eventheader_offset",
    "parse_tracepoint_name",
]
