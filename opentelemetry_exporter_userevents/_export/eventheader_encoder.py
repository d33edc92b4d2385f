# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader events built from fields, as ``eventheader_dynamic``'s EventBuilder builds
them for the Rust exporters: the 8-byte header, one metadata extension (the event's name,
then each field's name, encoding and format) and the payload (the values, in order).

A field is a ``(metadata, payload)`` pair of bytes, so a record can be measured, cut and
assembled without encoding it twice (:mod:`.eventheader_fit`). Byte order and pointer size
are the machine's, and the header's flags say which, as eventheader.h writes them.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from typing import Any

from opentelemetry_exporter_userevents.abi.binary import S64_MAX, S64_MIN
from opentelemetry_exporter_userevents.record.eventheader import (
    ENCODING_CHAIN,
    Encoding,
    ExtensionKind,
    Format,
    HeaderFlags,
    Opcode,
)

Field = tuple[bytes, bytes]
"""One field: its metadata (name, encoding, format) and its payload."""

MAX_STRUCT_FIELDS = 127
"""A struct's field count is the low 7 bits of its format byte: fields past this many are
left out (the record counted in ``truncated``)."""
MAX_STRING_BYTES = 0xFFFF
"""A counted string's length is a u16; no record within the kernel's limits comes near."""

_END = "<" if sys.byteorder == "little" else ">"
_FLAGS = HeaderFlags.EXTENSION | (
    HeaderFlags.LITTLE_ENDIAN if sys.byteorder == "little" else HeaderFlags(0)
)
if struct.calcsize("P") == 8:
    _FLAGS |= HeaderFlags.POINTER64
_HEAD = struct.Struct(_END + "BBHHBBHH")
"""The header (flags, version, id, tag, opcode, level) and one extension's (size, kind)."""
HEAD_SIZE = _HEAD.size
_U16 = struct.Struct(_END + "H")
_I16 = struct.Struct(_END + "h")
_U32 = struct.Struct(_END + "I")
_I64 = struct.Struct(_END + "q")
_F64 = struct.Struct(_END + "d")

_STRING = bytes([Encoding.STRING_LENGTH16_CHAR8])
_BOOL = bytes([Encoding.VALUE8 | ENCODING_CHAIN, Format.BOOLEAN])
_I16_TYPE = bytes([Encoding.VALUE16 | ENCODING_CHAIN, Format.SIGNED_INT])
_U32_TYPE = bytes([Encoding.VALUE32 | ENCODING_CHAIN, Format.UNSIGNED_INT])
_I64_TYPE = bytes([Encoding.VALUE64 | ENCODING_CHAIN, Format.SIGNED_INT])
_F64_TYPE = bytes([Encoding.VALUE64 | ENCODING_CHAIN, Format.FLOAT])
_STRUCT = Encoding.STRUCT | ENCODING_CHAIN
_TRUE = b"\x01"
_FALSE = b"\x00"


def name(text: str) -> bytes | None:
    """A field's or event's name as metadata (UTF-8, NUL-terminated); None for a name
    EventHeader cannot hold: a ``;`` starts the name's attributes and a NUL ends it."""
    if ";" in text or "\0" in text:
        return None
    return utf8(text) + b"\0"


MAX_CACHED_NAMES = 4096
"""Attribute names kept encoded (:func:`cached_name`); past this many, the cache starts
over, so hostile names cost their encoding, never memory."""
_names: dict[str, bytes | None] = {}


def cached_name(key: object) -> bytes | None:
    """:func:`name` of an attribute key, kept for the next record (keys repeat); None for
    a key that is no string or no EventHeader name."""
    try:
        return _names[key]  # type: ignore[index]
    except KeyError:
        pass
    except TypeError:  # unhashable: no attribute key
        return None
    encoded = name(key) if type(key) is str else None
    if len(_names) >= MAX_CACHED_NAMES:
        _names.clear()
    _names[key] = encoded  # type: ignore[index]
    return encoded


def utf8(text: str) -> bytes:
    """``text`` as UTF-8; an unpaired surrogate (which no UTF-8 holds) as U+FFFD."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


def string(field_name: bytes, value: bytes) -> Field:
    """A counted UTF-8 string (Rust's ``add_str``); ``value`` at most MAX_STRING_BYTES."""
    return field_name + _STRING, _U16.pack(len(value)) + value


def string_value(field: Field) -> bytes:
    """The text of a field :func:`string` made."""
    return field[1][2:]


def boolean(field_name: bytes, value: bool) -> Field:
    return field_name + _BOOL, _TRUE if value else _FALSE


def i16(field_name: bytes, value: int) -> Field:
    return field_name + _I16_TYPE, _I16.pack(value)


def u32(field_name: bytes, value: int) -> Field:
    return field_name + _U32_TYPE, _U32.pack(value)


def i64(field_name: bytes, value: int) -> Field:
    return field_name + _I64_TYPE, _I64.pack(value)


def f64(field_name: bytes, value: float) -> Field:
    return field_name + _F64_TYPE, _F64.pack(value)


def attribute(field_name: bytes, value: Any) -> Field:
    """An attribute as Rust's exporters write one: bool, i64, f64 and string as
    themselves; an integer beyond i64 as its decimal text; anything else (lists, maps,
    bytes) as ``""``, as Rust writes them (docs/common-schema.md)."""
    kind = type(value)
    if kind is str:
        return string(field_name, utf8(value)[:MAX_STRING_BYTES])
    if kind is bool:
        return boolean(field_name, value)
    if kind is int:
        if S64_MIN <= value <= S64_MAX:
            return i64(field_name, value)
        return string(field_name, str(value).encode())
    if kind is float:
        return f64(field_name, value)
    if isinstance(value, bool):  # subclasses: IntEnum, numpy scalars, str enums
        return boolean(field_name, bool(value))
    if isinstance(value, int):
        return attribute(field_name, int(value))
    if isinstance(value, float):
        return f64(field_name, float(value))
    if isinstance(value, str):
        return attribute(field_name, str(value))
    return string(field_name, b"")


def struct_head(field_name: bytes, count: int) -> bytes:
    """A struct's metadata: its ``count`` fields follow it."""
    return field_name + bytes([_STRUCT, count])


def size(fields: Sequence[Field]) -> int:
    return sum(len(meta) + len(value) for meta, value in fields)


def event(event_name: bytes, level: int, parts: Sequence[tuple[bytes, Sequence[Field]]]) -> bytes:
    """The record: header, metadata extension, payload. ``parts`` are top-level fields
    ``(b"", [field])`` and structs ``(struct_head(...), fields)``, in order."""
    metadata = [event_name]
    payload = []
    for head, fields in parts:
        if head:
            metadata.append(head)
        for meta, value in fields:
            metadata.append(meta)
            payload.append(value)
    meta = b"".join(metadata)
    head = _HEAD.pack(_FLAGS, 0, 0, 0, Opcode.INFO, level, len(meta), ExtensionKind.METADATA)
    return head + meta + b"".join(payload)
