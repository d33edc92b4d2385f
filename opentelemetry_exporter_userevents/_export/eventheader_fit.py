# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Fitting an oversized EventHeader record into ``max_record_size``, in the order the
default format fits its records (:mod:`.fit`), on the encoded fields themselves:

1. texts longer than an eighth of the record are cut to that (:meth:`EventFitter.cap_texts`);
2. the caller leaves out links, as it would events and links;
3. attributes (PartC) are left out, largest first (:meth:`EventFitter.drop_fields`), only
   as far as a log's body cut to an eighth of the record would not make it fit;
4. texts are cut further, the body first (:meth:`EventFitter.cut_texts`).

Ids, times, ``_typeName`` and the links' JSON are never cut (a cut one would not read).
A cut text ends with TRUNCATION_MARK. Common Schema has no field for what was left out:
the exporter counts the record in ``truncated``; a record that still cannot fit (a
``max_record_size`` too small for its ids and times) raises ValueError, and is counted in
``dropped_invalid``.
"""

from __future__ import annotations

from opentelemetry_exporter_userevents._export.eventheader_encoder import (
    Field,
    string,
    string_value,
)
from opentelemetry_exporter_userevents.record.eventheader import Encoding
from opentelemetry_exporter_userevents.record.flags import TRUNCATION_MARK

_MARK = TRUNCATION_MARK.encode()
_STRING = Encoding.STRING_LENGTH16_CHAR8
PROTECTED = frozenset(
    (name + "\0").encode()
    for name in (
        "time",
        "startTime",
        "ext_dt_traceId",
        "ext_dt_spanId",
        "parentId",
        "_typeName",
        "links",
    )
)
"""Names of the fields that are never cut."""


def is_text(field: Field) -> bool:
    """A counted string (its metadata ends with the name's NUL and the bare encoding)."""
    meta = field[0]
    return meta[-1] == _STRING and meta[-2] == 0


def _cuttable(field: Field) -> bool:
    return is_text(field) and field[0][:-1] not in PROTECTED


class EventFitter:
    """The parts (lists of fields, changed in place) of one record being cut to fit."""

    def __init__(self, parts: list[list[Field]], overhead: int, max_size: int) -> None:
        """``overhead``: the bytes of everything that is not in ``parts``."""
        self.parts = parts
        self.overhead = overhead
        self.max_size = max_size
        self.truncated = False

    def over(self) -> int:
        """Bytes the record is over its size; 0 or less once it fits."""
        total = self.overhead
        for part in self.parts:
            for meta, value in part:
                total += len(meta) + len(value)
        return total - self.max_size

    def cap_texts(self, skip: bytes = b"") -> None:
        """Cut each text longer than an eighth of the record to that, but the field named
        ``skip`` (a log's body, cut last)."""
        cap = self.max_size // 8
        for part in self.parts:
            for index, field in enumerate(part):
                if (
                    len(field[1]) - 2 > cap
                    and _cuttable(field)
                    and not (skip and field[0].startswith(skip))
                    and self.over() > 0
                ):
                    part[index] = cut(field, cap)
                    self.truncated = True

    def drop_fields(self, part: list[Field], cut_first: list[Field] | None = None) -> int:
        """Leave out the largest fields of ``part`` until the record fits, or until cutting
        the texts of ``cut_first`` (a log's body, which :meth:`cap_texts` skipped) to an
        eighth of the record would make it fit: a long body does not push out a small
        attribute. Return how many were left out. Each field is measured once."""
        over = self.over() - self._spare(cut_first or [])
        if over <= 0 or not part:
            return 0
        by_size = sorted(range(len(part)), key=lambda i: len(part[i][0]) + len(part[i][1]))
        gone = set()
        while over > 0 and by_size:
            index = by_size.pop()
            gone.add(index)
            over -= len(part[index][0]) + len(part[index][1])
        part[:] = [field for index, field in enumerate(part) if index not in gone]
        self.truncated = True
        return len(gone)

    def _spare(self, fields: list[Field]) -> int:
        """Bytes that cutting the texts of ``fields`` to an eighth of the record gives."""
        cap = max(self.max_size // 8, len(_MARK))
        return sum(max(len(f[1]) - 2 - cap, 0) for f in fields if _cuttable(f))

    def cut_texts(self, first: list[Field]) -> None:
        """Cut texts by what the record is still over: the fields of ``first`` (a part),
        then those of every part, in order."""
        for part in (first, *self.parts):
            for index, field in enumerate(part):
                over = self.over()
                if over <= 0:
                    return
                if _cuttable(field) and len(field[1]) - 2 > len(_MARK):
                    part[index] = cut(field, len(field[1]) - 2 - over)
                    self.truncated = True

    def check(self) -> None:
        """Raise ValueError if the record still does not fit."""
        over = self.over()
        if over > 0:
            raise ValueError(f"record over max_record_size by {over} bytes after cutting")


def cut(field: Field, size: int) -> Field:
    """A text field cut to at most ``size`` bytes of valid UTF-8, ending with the marker."""
    keep = max(size - len(_MARK), 0)
    text = string_value(field)[:keep].decode("utf-8", "ignore").encode()
    return string(field[0][:-1], text + _MARK)
