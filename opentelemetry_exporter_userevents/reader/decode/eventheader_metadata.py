# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""An EventHeader metadata extension: the event's name and its field descriptors, read
whole into a tree before any payload is, so each of its bytes is read once.

Layout (eventheader.h, ``eventheader_extension_kind_metadata``): the event name,
zero-terminated, then each field's zero-terminated name, encoding byte, format byte if
the encoding's chain bit is set, tag (u16) if the format's chain bit is set, and count
(u16) if it is a constant-length array. A struct's format gives how many of the fields
after it are its own (the metadata may end first). Names are ``name{;attr=value}``, a
``;`` in a value doubled.

The C++ EventEnumerator reads the metadata as it walks the payload; here all of it is
checked, even the fields of an empty array of structs, and an empty struct (which it
refuses except in arrays) is refused everywhere.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    BAD_ARRAY_FLAGS,
    BAD_ENCODING,
    BAD_FIELD_COUNT,
    EMPTY_ARRAY,
    EMPTY_STRUCT,
    ENCODING_CARRAY,
    ENCODING_CHAIN,
    ENCODING_MASK,
    ENCODING_VARRAY,
    FORMAT_CHAIN,
    FORMAT_MASK,
    MAX_METADATA_FIELDS,
    MAX_STRUCT_DEPTH,
    MAX_TOP_LEVEL_FIELDS,
    TOO_DEEP,
    TRUNCATED_FIELD,
    UNTERMINATED_EVENT_NAME,
    Attributes,
    Encoding,
    EventHeaderError,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_values import utf8

_ATTRIBUTE = re.compile(r";([^;=]*)(?:=((?:[^;]|;;)*))?")
_ENCODINGS = tuple(Encoding)
_ARRAY_FLAGS = ENCODING_CARRAY | ENCODING_VARRAY


class FieldDef(NamedTuple):
    """One field descriptor."""

    name: str
    attributes: Attributes
    encoding: Encoding
    format: int
    """Without its chain bit; a struct's field count."""
    tag: int
    array: int
    """0, :data:`ENCODING_CARRAY` or :data:`ENCODING_VARRAY`."""
    length: int
    """A constant-length array's element count."""
    children: tuple[FieldDef, ...]
    """A struct's fields."""


class Metadata(NamedTuple):
    name: str
    attributes: Attributes
    fields: tuple[FieldDef, ...]


def split_name(raw: bytes) -> tuple[str, Attributes]:
    """``name;a=1;b=x;;y`` to ``name`` and ``(("a", "1"), ("b", "x;y"))``; an attribute
    without ``=`` has the value ``""``."""
    text = utf8(raw)
    semicolon = text.find(";")
    if semicolon < 0:
        return text, ()
    attributes = tuple(
        (match[1], (match[2] or "").replace(";;", ";"))
        for match in _ATTRIBUTE.finditer(text, semicolon)
    )
    return text[:semicolon], attributes


def parse_metadata(meta: bytes, big: bool) -> Metadata:
    """Raises :class:`EventHeaderError` for metadata that is cut short, names an unknown
    encoding or breaks a bound."""
    end = meta.find(b"\0")
    if end < 0:
        raise EventHeaderError(UNTERMINATED_EVENT_NAME)
    name, attributes = split_name(meta[:end])
    parser = _Parser(meta, end + 1, big)
    fields = parser.fields(MAX_TOP_LEVEL_FIELDS, 0)
    if parser.pos != len(meta):
        raise EventHeaderError(BAD_FIELD_COUNT)
    return Metadata(name, attributes, fields)


class _Parser:
    def __init__(self, meta: bytes, pos: int, big: bool) -> None:
        self.meta = meta
        self.pos = pos
        self.order: Literal["big", "little"] = "big" if big else "little"
        self.count = 0

    def fields(self, limit: int, depth: int) -> tuple[FieldDef, ...]:
        found: list[FieldDef] = []
        while len(found) < limit and self.pos < len(self.meta):
            found.append(self.field(depth))
        return tuple(found)

    def _u16(self, pos: int) -> int:
        if len(self.meta) - pos < 2:
            raise EventHeaderError(TRUNCATED_FIELD)
        return int.from_bytes(self.meta[pos : pos + 2], self.order)

    def field(self, depth: int) -> FieldDef:
        meta = self.meta
        nul = meta.find(b"\0", self.pos)
        if nul < 0 or len(meta) - nul < 2:
            raise EventHeaderError(TRUNCATED_FIELD)
        name, attributes = split_name(meta[self.pos : nul])
        pos = nul + 1
        encoding = meta[pos]
        pos += 1
        fmt = tag = count = 0
        if encoding & ENCODING_CHAIN:
            if pos == len(meta):
                raise EventHeaderError(TRUNCATED_FIELD)
            fmt = meta[pos]
            pos += 1
            if fmt & FORMAT_CHAIN:
                tag = self._u16(pos)
                pos += 2
        array = encoding & _ARRAY_FLAGS
        if array == _ARRAY_FLAGS:
            raise EventHeaderError(BAD_ARRAY_FLAGS)
        if array == ENCODING_CARRAY:
            count = self._u16(pos)
            pos += 2
            if count == 0:
                raise EventHeaderError(EMPTY_ARRAY)
        kind = encoding & ENCODING_MASK
        if kind == Encoding.INVALID or kind >= len(_ENCODINGS):
            raise EventHeaderError(BAD_ENCODING)
        self.count += 1
        if self.count > MAX_METADATA_FIELDS:
            raise EventHeaderError(BAD_FIELD_COUNT)
        self.pos = pos
        fmt &= FORMAT_MASK
        children: tuple[FieldDef, ...] = ()
        if kind == Encoding.STRUCT:
            if fmt == 0:
                raise EventHeaderError(EMPTY_STRUCT)
            if depth >= MAX_STRUCT_DEPTH:
                raise EventHeaderError(TOO_DEEP)
            children = self.fields(fmt, depth + 1)
        return FieldDef(name, attributes, _ENCODINGS[kind], fmt, tag, array, count, children)
