# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A small EventHeader encoder for tests: a header, extensions, metadata from field specs,
and a payload from the values put in (eventheader.h's layout, written independently of
the decoder)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address
from typing import Any
from uuid import UUID

from opentelemetry_exporter_userevents.reader.decode.eventheader_types import Encoding, Format

E = Encoding
F = Format


@dataclass
class Spec:
    """One field: its descriptor and, for the payload, its value (a struct's: its members'
    values; an array's: a list of its elements')."""

    name: str
    encoding: Encoding
    format: int = 0
    tag: int = 0
    array: str = ""
    """``""``, ``"c"`` (constant length) or ``"v"`` (variable length)."""
    value: Any = None
    children: list[Spec] = field(default_factory=list)
    """A struct's member specs."""
    attributes: tuple[tuple[str, str], ...] = ()


def raw_name(name: str, attributes: tuple[tuple[str, str], ...]) -> bytes:
    text = name + "".join(f";{key}={value.replace(';', ';;')}" for key, value in attributes)
    return text.encode() + b"\0"


def metadata(event_name: str, specs: list[Spec], big: bool, attributes: Any = ()) -> bytes:
    out = bytearray(raw_name(event_name, attributes))
    for spec in specs:
        _descriptor(spec, out, big)
    return bytes(out)


def _descriptor(spec: Spec, out: bytearray, big: bool) -> None:
    u16 = ">H" if big else "<H"
    out += raw_name(spec.name, spec.attributes)
    encoding = int(spec.encoding) | {"": 0, "c": 0x20, "v": 0x40}[spec.array]
    fmt = len(spec.children) if spec.encoding == E.STRUCT else spec.format
    if fmt or spec.tag:
        out.append(encoding | 0x80)
        out.append(fmt | (0x80 if spec.tag else 0))
        if spec.tag:
            out += struct.pack(u16, spec.tag)
    else:
        out.append(encoding)
    if spec.array == "c":
        out += struct.pack(u16, len(spec.value))
    for child in spec.children:
        _descriptor(child, out, big)


def payload(specs: list[Spec], big: bool) -> bytes:
    out = bytearray()
    for spec in specs:
        _field(spec, out, big)
    return bytes(out)


def _field(spec: Spec, out: bytearray, big: bool) -> None:
    if not spec.array:
        _one(spec, spec.value, out, big)
        return
    if spec.array == "v":
        out += struct.pack(">H" if big else "<H", len(spec.value))
    for element in spec.value:
        _one(spec, element, out, big)


def _one(spec: Spec, value: Any, out: bytearray, big: bool) -> None:
    if spec.encoding == E.STRUCT:
        for child, member in zip(spec.children, value, strict=True):
            _field(_with(child, member), out, big)
        return
    out += encode_value(spec.encoding, spec.format, value, big)


def _with(spec: Spec, value: Any) -> Spec:
    return Spec(spec.name, spec.encoding, spec.format, spec.tag, spec.array, value, spec.children)


_SIZES = {E.VALUE8: 1, E.VALUE16: 2, E.VALUE32: 4, E.VALUE64: 8}
_UNITS = {
    E.ZSTRING_CHAR16: "utf-16",
    E.ZSTRING_CHAR32: "utf-32",
    E.STRING_LENGTH16_CHAR16: "utf-16",
    E.STRING_LENGTH16_CHAR32: "utf-32",
}


def encode_value(encoding: Encoding, fmt: int, value: Any, big: bool) -> bytes:
    """A value's payload bytes."""
    order = "big" if big else "little"
    end = ">" if big else "<"
    if encoding in _SIZES:
        size = _SIZES[encoding]
        if isinstance(value, bytes):
            return value
        if isinstance(value, bool):
            return int(value).to_bytes(size, order)
        if isinstance(value, float):
            return struct.pack(end + ("f" if size == 4 else "d"), value)
        if isinstance(value, IPv4Address):
            return value.packed
        if isinstance(value, str):
            return ord(value).to_bytes(size, order)
        if fmt == F.PORT:
            return int(value).to_bytes(2, "big")
        return int(value).to_bytes(size, order, signed=value < 0)
    if encoding == E.VALUE128:
        if isinstance(value, UUID):
            return value.bytes
        if isinstance(value, IPv6Address):
            return value.packed
        return bytes(value)
    length16 = encoding in (
        E.STRING_LENGTH16_CHAR8,
        E.STRING_LENGTH16_CHAR16,
        E.STRING_LENGTH16_CHAR32,
        E.BINARY_LENGTH16_CHAR8,
    )
    if value is None or isinstance(value, (bytes, int)):
        raw = _fixed_in_char8(fmt, value, big)
    elif fmt == F.STRING8:
        raw = value.encode("latin-1")
    elif encoding in _UNITS:
        raw = value.encode(_UNITS[encoding] + ("-be" if big else "-le"))
    else:
        raw = value.encode("utf-8")
    unit = 4 if "32" in _UNITS.get(encoding, "") else 2 if encoding in _UNITS else 1
    if length16:
        return struct.pack(">H" if big else "<H", len(raw) // unit) + raw
    return raw + bytes(unit)


def _fixed_in_char8(fmt: int, value: Any, big: bool) -> bytes:
    """A length-prefixed char8 value of a fixed-size format, or binary."""
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    signed = fmt == F.SIGNED_INT
    size = value_size(value, signed)
    return int(value).to_bytes(size, "big" if big else "little", signed=signed)


def value_size(value: int, signed: bool) -> int:
    """The smallest of 1, 2, 4, 8 bytes that hold ``value``."""
    for size in (1, 2, 4, 8):
        bits = 8 * size
        if (-(1 << (bits - 1)) <= value < 1 << (bits - 1)) if signed else 0 <= value >> bits < 1:
            return size
    raise ValueError(value)


def event(
    metadata_bytes: bytes,
    payload_bytes: bytes,
    big: bool,
    level: int = 4,
    activity: bytes | None = None,
    header: tuple[int, int, int, int] = (0, 0, 0, 0),
    extra: tuple[tuple[int, bytes], ...] = (),
) -> bytes:
    """A whole event: the header (version, id, tag, opcode), ``extra`` extension blocks
    (kind, data) first, the activity id, the metadata last."""
    end = ">" if big else "<"
    version, event_id, tag, opcode = header
    flags = 0x01 | 0x04 | (0 if big else 0x02)
    out = bytearray(struct.pack(end + "BBHHBB", flags, version, event_id, tag, opcode, level))
    blocks = [*extra, *([(2, activity)] if activity is not None else []), (1, metadata_bytes)]
    for index, (kind, data) in enumerate(blocks):
        chain = 0x8000 if index + 1 < len(blocks) else 0
        out += struct.pack(end + "HH", len(data), kind | chain) + data
    return bytes(out + payload_bytes)
