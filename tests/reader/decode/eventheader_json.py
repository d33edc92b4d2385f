# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Our decoded EventHeader events in the textual conventions of the JSON that
LinuxTracepoints' ``perf-decode`` (its C++ EventFormatter) writes, so the two compare.

Its conventions, from ``EventFormatter.cpp``: hex ints are ``"0x%X"`` strings; errno is
``"EPERM(1)"`` (its own table, read from its source here) or ``"ERRNO(n)"``; times are
``"%04d-%02u-%02uT%02u:%02u:%02u"`` in UTC (proleptic Gregorian, as ``gmtime_r``) or
``"TIME(n)"`` when the year does not fit a C int; booleans 0 and 1 are ``false`` and
``true``, other values the int32; floats the shortest text that reads back as the same
float (float32 for 4-byte values), NaN and infinities as ``"nan"``, ``"-nan"``,
``"inf"``, ``"-inf"`` (a length-prefixed float's size is not kept: one that a float32
holds exactly is taken for a float32); binary is lowercase hex bytes separated by spaces; UUIDs
lowercase and dashed; IPv4 dotted; IPv6 as ``inet_ntop`` writes it; a length-0 value of
a fixed-size format ``null``; structs objects (here: lists of name, value pairs, since
names repeat); a field name is its raw name (with its ``;attributes``) plus
``;tag=0x%X`` when it has a tag and the JSON shows tags.

Text the C++ decoder wrote as bytes that are not UTF-8 (code points above U+10FFFF as 5
to 7 byte sequences, surrogates as 3 bytes) is read here with ``surrogateescape``; on
both sides each run of such bytes becomes one U+FFFD (our decoder gives U+FFFD for a code
point a Python string cannot hold).
"""

from __future__ import annotations

import json
import math
import re
import socket
import struct
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import Any
from uuid import UUID

from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    Encoding,
    EventField,
    EventHeaderEvent,
    Format,
)

_ESCAPED = re.compile("[\udc80-\udcff]+")
_ERRNO_ENTRY = re.compile(r'"(\w+\(\d+\))"')
_F32 = struct.Struct("<f")


def same(want: Any, got: Any) -> bool:
    """JSON values equal, numbers by value (the C++ decoder prints 65.0 as ``65``)."""
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(map(same, want, got))
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return want == got
    return type(want) is type(got) and want == got


def load_json(path: Path) -> list[list[tuple[str, Any]]]:
    """The events of a ``*.json`` of TestOutput: a BOM, then ``"name": [events]`` (a
    member, not a document), each event an object whose names may repeat."""
    text = path.read_bytes().removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogateescape")
    document = json.loads("{" + text + "}", object_pairs_hook=list)
    ((_name, events),) = document
    return [normal(event) for event in events]


def errno_names(formatter_source: Path) -> list[str]:
    """``ErrnoStrings`` of EventFormatter.cpp, in order."""
    text = formatter_source.read_text(encoding="utf-8")
    table = text[text.index("ErrnoStrings[] = {") : text.index("};", text.index("ErrnoStrings"))]
    return _ERRNO_ENTRY.findall(table)


def normal(value: Any) -> Any:
    """Runs of bytes that were not UTF-8 to one U+FFFD; pairs to lists (as JSON has them)."""
    if isinstance(value, str):
        return _ESCAPED.sub("\ufffd", value)
    if isinstance(value, (list, tuple)):
        return [normal(item) for item in value]
    return value


def _text(value: str) -> str:
    raw = value.encode("utf-8", "surrogatepass")
    return _ESCAPED.sub("\ufffd", raw.decode("utf-8", "surrogateescape"))


def _time(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    year, month, day = _civil(days)
    if not -(2**31) <= year - 1900 < 2**31:
        return f"TIME({seconds})"
    hour, rest = divmod(rest, 3600)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _civil(days: int) -> tuple[int, int, int]:
    """Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, doy - (153 * mp + 2) // 5 + 1


def _is_float32(value: float) -> bool:
    try:
        return bool(_F32.unpack(_F32.pack(value))[0] == value)
    except OverflowError:
        return False


def _float(value: float, encoding: Encoding) -> Any:
    if math.isnan(value):
        return "-nan" if math.copysign(1, value) < 0 else "nan"
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    if encoding == Encoding.VALUE64 or not _is_float32(value):
        return value  # a float64 (a length-prefixed value's size is not kept: see above)
    packed = _F32.pack(value)
    for digits in range(1, 10):  # the shortest that reads back as the same float32
        shortest = float(f"{value:.{digits}g}")
        if _F32.pack(shortest) == packed:
            return shortest
    return value


class JsonForm:
    """Our values as the C++ decoder prints them."""

    def __init__(self, errnos: list[str], tags: bool) -> None:
        self.errnos = errnos
        self.tags = tags

    def event(self, event: EventHeaderEvent) -> list[Any]:
        members: list[Any] = [["n", f"{_text(event.provider)}:{_text(event.name)}"]]
        members += [[self.name(field), self.field(field)] for field in event.fields]
        meta: list[Any] = []
        for key, value in (("id", event.id), ("version", event.version)):
            if value:
                meta.append([key, value])
        if event.level:
            meta.append(["level", event.level])
        if event.keyword:
            meta.append(["keyword", f"0x{event.keyword:X}"])
        if event.opcode:
            meta.append(["opcode", event.opcode])
        if event.tag:
            meta.append(["tag", f"0x{event.tag:X}"])
        if event.activity_id is not None:
            meta.append(["activity", str(UUID(bytes=event.activity_id))])
        if event.related_activity_id is not None:
            meta.append(["relatedActivity", str(UUID(bytes=event.related_activity_id))])
        return [*members, ["meta", meta]]

    def name(self, field: EventField) -> str:
        name = field.name + "".join(
            f";{key}={value.replace(';', ';;')}" for key, value in field.attributes
        )
        if self.tags and field.tag:
            name += f";tag=0x{field.tag:X}"
        return _text(name)

    def field(self, field: EventField) -> Any:
        if field.array:
            assert isinstance(field.value, list)
            return [self.value(field, element) for element in field.value]
        return self.value(field, field.value)

    def value(self, field: EventField, value: Any) -> Any:
        if isinstance(value, tuple):
            return [[self.name(member), self.field(member)] for member in value]
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            return self._int(field, value)
        if isinstance(value, float):
            return _float(value, field.encoding)
        if isinstance(value, str):
            return _text(value)
        if isinstance(value, bytes):
            return " ".join(f"{byte:02x}" for byte in value)
        if isinstance(value, UUID):
            return str(value)
        if isinstance(value, IPv4Address):
            return str(value)
        if isinstance(value, IPv6Address):
            return socket.inet_ntop(socket.AF_INET6, value.packed)
        raise AssertionError(f"a value of type {type(value).__name__}")

    def _int(self, field: EventField, value: int) -> Any:
        small = field.encoding in (Encoding.VALUE8, Encoding.VALUE16)
        if field.format == Format.HEX_INT:
            return f"0x{value:X}"
        if field.format == Format.ERRNO and not small and field.encoding != Encoding.VALUE64:
            unsigned = value & 0xFFFFFFFF
            return self.errnos[unsigned] if unsigned < len(self.errnos) else f"ERRNO({value})"
        if field.format == Format.TIME and not small:
            return _time(value)
        return value
