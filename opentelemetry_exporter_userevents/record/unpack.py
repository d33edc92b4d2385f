# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Reading a record's fields where the tracepoint's ``format`` file says they are.

Offsets and sizes come from the format, never from our own layout: a kernel or a schema
version that moves a field still decodes. One ``struct`` is built per format (gaps
skipped), so a record is unpacked with one call: the reader decodes hundreds of thousands
of records a second this way.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from opentelemetry_exporter_userevents.abi.format import EventFormat

if TYPE_CHECKING:
    from opentelemetry_exporter_userevents.record.schema import Schema

_INT_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


class RecordUnpacker:
    """Unpacks records of one format into ``{field name: value}`` for one schema: integers,
    ``char[N]`` as ASCII text without NULs, ``__rel_loc`` texts as ``str``."""

    def __init__(self, schema: Schema, fmt: EventFormat) -> None:
        """Raises ValueError if ``fmt`` lacks a field of ``schema``, has one at another size,
        or has fields that overlap."""
        plan = []
        for field in schema.fields:
            try:
                where = fmt.field(field.name)
            except KeyError:
                raise ValueError(f"{fmt.name} has no field {field.name!r}") from None
            expected = struct.calcsize("<" + field.struct_code)
            if where.size != expected:
                raise ValueError(f"{fmt.name} has {field.name!r} of {where.size} bytes")
            kind = "text" if field.is_text else "chars" if field.type.startswith("char[") else ""
            plan.append((field.name, kind, where.offset, where.offset + where.size, where.signed))
        codes, position, order = ["<"], 0, []
        for name, kind, start, end, signed in sorted(plan, key=lambda p: p[2]):
            if start < position:
                raise ValueError(f"{fmt.name} has overlapping fields at {name!r}")
            codes.append(f"{start - position}x" if start > position else "")
            if kind == "chars":
                codes.append(f"{end - start}s")
            else:
                code = _INT_CODES[end - start]
                codes.append(code.lower() if signed and kind != "text" else code)
            order.append((name, kind, end))
            position = end
        layout = struct.Struct("".join(codes))
        self.fields = {
            name: (offset, end - offset, kind, signed) for name, kind, offset, end, signed in plan
        }
        """Each field's offset, size, kind (``text``, ``chars`` or ``""``: an integer) and
        whether the format says it is signed: what a native decoder needs."""
        self.needed = layout.size
        """The bytes a record must have."""
        self.format_name = fmt.name
        self._unpack_from = layout.unpack_from
        self._needed = layout.size
        self._names = tuple(name for name, _, _ in order)
        self._texts = tuple((name, end) for name, kind, end in order if kind == "text")
        """Each ``__rel_loc`` field and where its 4-byte slot ends (its offsets count from
        there)."""
        self._chars = tuple(name for name, kind, _ in order if kind == "chars")

    def unpack(self, record: bytes | memoryview) -> dict[str, Any]:
        """The values of one record (common header included). Raises ValueError if it is
        too short, a text points outside it, or a text is not UTF-8."""
        size = len(record)
        if size < self._needed:
            raise ValueError(f"record of {size} bytes is too short for {self.format_name}")
        values: dict[str, Any] = dict(zip(self._names, self._unpack_from(record), strict=True))
        for name, end in self._texts:
            loc = values[name]
            first = end + (loc & 0xFFFF)
            last = first + (loc >> 16) - 1
            if last >= size or last < first:
                raise ValueError(f"{name!r} points outside the record")
            values[name] = str(record[first:last], "utf-8")
        for name in self._chars:
            values[name] = values[name].rstrip(b"\0").decode("ascii")
        return values
