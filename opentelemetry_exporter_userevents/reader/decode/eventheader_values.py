# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""An EventHeader value's bytes, its encoding and format to a Python value, as the C++
EventFormatter reads them (``AppendValueImpl``).

Ints stay ints whatever their format (hex, errno, pid, time in seconds since 1970, port:
the field's format says how to show them); a boolean is a bool if 0 or 1, else the int32
the C++ decoder prints; floats are floats, binary ``bytes``, strings ``str``, UUIDs
``uuid.UUID``, IP addresses ``ipaddress`` objects, and a length-0 value of a fixed-size
format None (the C++ ``null``). A value whose size does not fit its format reads as its
encoding's default. Text is read as leniently as the C++ decoder reads it: invalid UTF-8
bytes as Latin-1, unpaired surrogates kept, and code points above U+10FFFF, which a Python
string cannot hold, as U+FFFD.
"""

from __future__ import annotations

import codecs
import struct
from ipaddress import IPv4Address, IPv6Address
from typing import Literal
from uuid import UUID

from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    Encoding,
    Format,
    Scalar,
    Value,
)

LENIENT = "opentelemetry-eventheader-lenient"
"""The codec error handler :func:`_lenient` is registered as."""

FIXED_SIZES = {
    Encoding.VALUE8: 1,
    Encoding.VALUE16: 2,
    Encoding.VALUE32: 4,
    Encoding.VALUE64: 8,
    Encoding.VALUE128: 16,
}
ZSTRING_UNITS = {Encoding.ZSTRING_CHAR8: 1, Encoding.ZSTRING_CHAR16: 2, Encoding.ZSTRING_CHAR32: 4}
LENGTH16_UNITS = {
    Encoding.STRING_LENGTH16_CHAR8: 1,
    Encoding.BINARY_LENGTH16_CHAR8: 1,
    Encoding.STRING_LENGTH16_CHAR16: 2,
    Encoding.STRING_LENGTH16_CHAR32: 4,
}

_SIZED: dict[int, tuple[int, ...]] = {
    Format.UNSIGNED_INT: (1, 2, 4, 8),
    Format.SIGNED_INT: (1, 2, 4, 8),
    Format.HEX_INT: (1, 2, 4, 8),
    Format.ERRNO: (4,),
    Format.PID: (4,),
    Format.TIME: (4, 8),
    Format.BOOLEAN: (1, 2, 4),
    Format.FLOAT: (4, 8),
    Format.UUID: (16,),
    Format.PORT: (2,),
    Format.IP_ADDRESS: (4, 16),
    Format.IP_ADDRESS_OBSOLETE: (4, 16),
}
"""Fixed-size formats, and the sizes a length-prefixed char8 value may have to read as one
(eventheader.h, event_field_format)."""
_BOM_FORMATS = (Format.STRING_UTF_BOM, Format.STRING_XML, Format.STRING_JSON)
_SIGNED_AT: dict[int, tuple[int, ...]] = {
    Format.SIGNED_INT: (1, 2, 4, 8),
    Format.PID: (4,),
    Format.ERRNO: (4,),
}
_FLOATS = {(4, False): struct.Struct("<f"), (4, True): struct.Struct(">f")}
_FLOATS.update({(8, False): struct.Struct("<d"), (8, True): struct.Struct(">d")})


def byte_order(big: bool) -> Literal["big", "little"]:
    return "big" if big else "little"


def _lenient(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    data, start, encoding = error.object, error.start, error.encoding
    if "16" in encoding:  # an unpaired surrogate: kept
        unit = int.from_bytes(data[start : start + 2], byte_order(encoding.endswith("be")))
        return chr(unit), start + 2
    if "32" in encoding:  # a surrogate (kept) or above U+10FFFF
        code = int.from_bytes(data[start : start + 4], byte_order(encoding.endswith("be")))
        return (chr(code) if code <= 0x10FFFF else "\ufffd"), start + 4
    lead = data[start]
    if lead == 0xED and len(data) - start >= 3 and data[start + 1] >= 0xA0:
        second, third = data[start + 1], data[start + 2]
        if second <= 0xBF and 0x80 <= third <= 0xBF:  # a surrogate's 3 bytes: kept
            return chr(0xD000 | (second & 0x3F) << 6 | third & 0x3F), start + 3
    return chr(lead), start + 1  # read as Latin-1


codecs.register_error(LENIENT, _lenient)


def utf8(raw: bytes) -> str:
    return raw.decode("utf-8", LENIENT)


def _utf16(raw: bytes, big: bool) -> str:
    return raw[: len(raw) & ~1].decode("utf-16-be" if big else "utf-16-le", LENIENT)


def _utf32(raw: bytes, big: bool) -> str:
    return raw[: len(raw) & ~3].decode("utf-32-be" if big else "utf-32-le", LENIENT)


def _char(code: int) -> str:
    return chr(code) if code <= 0x10FFFF else "\ufffd"


def _with_bom(raw: bytes) -> str | None:
    """The text after a byte order mark, in the order it says; None if there is none."""
    if raw[:4] == b"\xff\xfe\0\0":
        return _utf32(raw[4:], False)
    if raw[:4] == b"\0\0\xfe\xff":
        return _utf32(raw[4:], True)
    if raw[:2] == b"\xff\xfe":
        return _utf16(raw[2:], False)
    if raw[:2] == b"\xfe\xff":
        return _utf16(raw[2:], True)
    if raw[:3] == b"\xef\xbb\xbf":
        return utf8(raw[3:])
    return None


def fixed_value(fmt: int, raw: bytes, big: bool) -> Scalar:
    """A value of 1, 2, 4, 8 or 16 bytes (a ValueN encoding)."""
    size = len(raw)
    order = byte_order(big)
    if size == 16:
        if fmt == Format.UUID:
            return UUID(bytes=raw)
        if fmt in (Format.IP_ADDRESS, Format.IP_ADDRESS_OBSOLETE):
            return IPv6Address(raw)
        return raw
    if fmt == Format.HEX_BYTES:
        return raw
    if size in _SIGNED_AT.get(fmt, ()) or (fmt == Format.TIME and size >= 4):
        return int.from_bytes(raw, order, signed=True)
    if fmt == Format.BOOLEAN and size <= 4:
        flag = int.from_bytes(raw, order)
        return flag == 1 if flag <= 1 else flag - (flag >> 31 << 32)  # as int32
    if fmt == Format.FLOAT and size >= 4:
        return float(_FLOATS[size, big].unpack(raw)[0])
    if fmt == Format.STRING8 and size == 1:
        return chr(raw[0])
    if fmt == Format.STRING_UTF and size in (2, 4):
        return _char(int.from_bytes(raw, order))
    if fmt == Format.PORT and size == 2:
        return int.from_bytes(raw, "big")
    if fmt in (Format.IP_ADDRESS, Format.IP_ADDRESS_OBSOLETE) and size == 4:
        return IPv4Address(raw)
    return int.from_bytes(raw, order)


_ARRAY_CODES: dict[tuple[int, int], str] = {
    **{
        (fmt, size): code
        for fmt in (Format.DEFAULT, Format.UNSIGNED_INT, Format.HEX_INT)
        for size, code in ((1, "B"), (2, "H"), (4, "I"), (8, "Q"))
    },
    **{(Format.SIGNED_INT, size): code for size, code in ((1, "b"), (2, "h"), (4, "i"), (8, "q"))},
    (Format.FLOAT, 4): "f",
    (Format.FLOAT, 8): "d",
}
"""struct codes of the formats :func:`fixed_value` reads as plain ints or floats."""


def fixed_array(fmt: int, raw: bytes, size: int, big: bool) -> list[Value]:
    """The elements of an array of ValueN values (``raw``: all of them), plain ints and
    floats unpacked at once."""
    code = _ARRAY_CODES.get((fmt, size))
    if code is not None:
        return list(struct.unpack(f"{'>' if big else '<'}{len(raw) // size}{code}", raw))
    return [fixed_value(fmt, raw[i : i + size], big) for i in range(0, len(raw), size)]


def string_value(encoding: Encoding, fmt: int, raw: bytes, big: bool) -> Scalar:
    """A zero-terminated or length-prefixed value (its bytes without length or terminator)."""
    if fmt == Format.HEX_BYTES:
        return raw
    unit = ZSTRING_UNITS.get(encoding) or LENGTH16_UNITS[encoding]
    if unit == 1:
        sizes = _SIZED.get(fmt) if encoding not in ZSTRING_UNITS else None
        if sizes is not None:
            if not raw:
                return None
            if len(raw) in sizes:
                return fixed_value(fmt, raw, big)
            fmt = Format.DEFAULT
        if fmt == Format.STRING8:
            return raw.decode("latin-1")
        if fmt in _BOM_FORMATS:
            text = _with_bom(raw)
            return utf8(raw) if text is None else text
        if encoding == Encoding.BINARY_LENGTH16_CHAR8 and fmt != Format.STRING_UTF:
            return raw
        return utf8(raw)
    if fmt in _BOM_FORMATS:
        text = _with_bom(raw)
        if text is not None:
            return text
    return _utf16(raw, big) if unit == 2 else _utf32(raw, big)
