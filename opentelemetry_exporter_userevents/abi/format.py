# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Format text: tracefs ``format`` files and the field lists of registration commands.

The one parser of ``field:...; offset:...; size:...;`` lines (event formats and
``header_page``) and of the multi-format ``NAME.<hex id>`` suffix. It reads no files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FIELD_LINE = re.compile(
    r"^\s*field:(?P<decl>[^;]*);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);"
    r"\s*signed:(?P<signed>-?\d+);"
)
_ARRAY_SUFFIX = re.compile(r"\[[^\]]*\]")


@dataclass(frozen=True)
class FormatField:
    """One field of an event ``format`` file; layout comes from offset and size only."""

    name: str
    type: str
    """The declaration without the name, array brackets removed (e.g. ``__rel_loc char``)."""
    offset: int
    size: int
    signed: bool
    is_array: bool


@dataclass(frozen=True)
class EventFormat:
    """A parsed tracefs ``format`` file."""

    name: str
    id: int
    common_fields: tuple[FormatField, ...]
    fields: tuple[FormatField, ...]
    print_fmt: str

    def field(self, name: str) -> FormatField:
        for field in self.fields:
            if field.name == name:
                return field
        raise KeyError(name)


def parse_format(text: str) -> EventFormat:
    """Parse a ``format`` file; raises ValueError on text that is not one.

    Declared array lengths are ignored (user_events never sets them, Linux 6.12
    trace_events.c f_show), so the name is the last token without ``[...]``.
    """
    name = None
    event_id = None
    print_fmt = ""
    common: list[FormatField] = []
    fields: list[FormatField] = []
    target = common
    in_format = False
    for line in text.splitlines():
        if line.startswith("name:"):
            name = line[5:].strip()
        elif line.startswith("ID:"):
            event_id = int(line[3:].strip())
        elif line.startswith("format:"):
            in_format = True
        elif line.startswith("print fmt:"):
            print_fmt = line[len("print fmt:") :].strip()
            in_format = False
        elif in_format and not line.strip():
            target = fields
        elif in_format:
            field = parse_field_line(line)
            if field is None:
                raise ValueError(f"unexpected line in format file: {line!r}")
            target.append(field)
    if name is None or event_id is None:
        raise ValueError("format file has no name or ID line")
    return EventFormat(name, event_id, tuple(common), tuple(fields), print_fmt)


def parse_field_line(line: str) -> FormatField | None:
    """One ``field:DECL; offset:N; size:N; signed:N;`` line (of a ``format`` file or of
    ``header_page``); None if the line is not one."""
    match = _FIELD_LINE.match(line)
    if match is None:
        return None
    decl = match["decl"].strip()
    head, _, last = decl.rpartition(" ")
    is_array = "[" in decl
    if not head:  # "u32 " registers a field with an empty name, shown as "u32 ;"
        head, last = decl, ""
    return FormatField(
        name=_ARRAY_SUFFIX.sub("", last),
        type=" ".join(_ARRAY_SUFFIX.sub("", head).split()),
        offset=int(match["offset"]),
        size=int(match["size"]),
        signed=match["signed"] not in ("0",),
        is_array=is_array,
    )


_SCALAR_SIZES = {
    "s8": 1, "u8": 1, "char": 1, "unsigned char": 1,
    "s16": 2, "u16": 2, "short": 2, "unsigned short": 2,
    "s32": 4, "u32": 4, "int": 4, "unsigned int": 4,
    "s64": 8, "u64": 8,
}  # fmt: skip


def command_fields(command: str) -> list[tuple[str, str, int]]:
    """The (type, name, size) of each field of a registration command, as tracefs shows them.

    Raises ValueError for text the kernel would not accept.
    """
    _, _, args = command.partition(" ")
    result = []
    for raw in args.split(";"):
        tokens = raw.strip().split(" ")
        if tokens == [""]:
            continue
        if tokens[0] == "struct":  # struct TYPE NAME SIZE
            if len(tokens) != 4:
                raise ValueError(f"struct field needs a type, a name and a size: {raw!r}")
            ftype, fname = " ".join(tokens[:2]), tokens[2]
        elif len(tokens) >= 2:
            ftype, fname = " ".join(tokens[:-1]), tokens[-1]
        else:
            raise ValueError(f"field without a name: {raw!r}")
        base = _ARRAY_SUFFIX.sub("", ftype)
        if ftype.startswith(("__data_loc ", "__rel_loc ")):
            size = 4
        elif ftype.startswith("struct "):
            size = int(tokens[3])
        elif base != ftype:
            size = int(ftype[len(base) + 1 : -1], 0)
        elif ftype in _SCALAR_SIZES:
            size = _SCALAR_SIZES[ftype]
        else:
            raise ValueError(f"unknown field type: {ftype!r}")
        result.append((base, fname, size))
    return result


_MULTI_FORMAT_SUFFIX = re.compile(r"^(?P<base>.+)\.(?P<id>[0-9a-fA-F]+)$")


def split_multi_format_name(tracepoint: str) -> tuple[str, int | None]:
    """``otel_span.1f`` -> (``otel_span``, 0x1f): a multi-format tracepoint's name and the
    id the kernel gave its format; a single-format name comes back with None."""
    match = _MULTI_FORMAT_SUFFIX.match(tracepoint)
    if match is None:
        return tracepoint, None
    return match["base"], int(match["id"], 16)
