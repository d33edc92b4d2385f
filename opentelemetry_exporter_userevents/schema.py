# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The record schemas: the single source of truth for what the writer writes and the
reader reads.

A schema is a list of fields with kernel types. Its registration command is generated
from that list and nothing else, deterministically to the byte, so every process with
the same schema shares one multi-format tracepoint (``user_events_multi/otel_span.<id>``).
A changed schema registers a new id, and readers of the old one keep working.

Layout: fixed-size fields first, then one ``__rel_loc char[]`` slot per text field, then
the texts themselves, each NUL-terminated, in field order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry_exporter_userevents import anyvalue
from opentelemetry_exporter_userevents.abi import EventFormat

_FIXED = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "s64": "q"}
TEXT = "__rel_loc char[]"


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    """The kernel type as written in the command: u8..u64, s64, char[N], or TEXT."""
    doc: str

    @property
    def is_text(self) -> bool:
        return self.type == TEXT

    @property
    def struct_code(self) -> str:
        if self.is_text:
            return "I"
        if self.type.startswith("char["):
            return f"{int(self.type[5:-1])}s"
        return _FIXED[self.type]


class Schema:
    """One tracepoint's fields; packs records for the writer and unpacks them for the reader."""

    def __init__(self, name: str, fields: Sequence[Field], doc: str) -> None:
        fixed = [f for f in fields if not f.is_text]
        texts = [f for f in fields if f.is_text]
        if list(fields) != fixed + texts:
            raise ValueError("fixed-size fields must come before text fields")
        self.name = name
        self.fields = tuple(fields)
        self.fixed = tuple(fixed)
        self.texts = tuple(texts)
        self.doc = doc
        self._struct = struct.Struct("<" + "".join(f.struct_code for f in self.fields))
        self.header_size = self._struct.size
        # A __rel_loc counts from just past its own 4-byte slot; the first text starts at
        # header_size, so text i starts this far past slot i, plus the sizes before it.
        self._loc_bases = tuple(4 * (len(texts) - 1 - i) for i in range(len(texts)))

    def command(self, name: str | None = None) -> str:
        """The registration command: ``NAME type field; type field; ...``."""
        return f"{name or self.name} " + "; ".join(f"{f.type} {f.name}" for f in self.fields)

    def pack(self, fixed: Sequence[object], texts: Sequence[bytes]) -> bytes:
        """A record payload from the fixed values and the texts (UTF-8, no NUL inside)."""
        locs = []
        before = 0
        for base, text in zip(self._loc_bases, texts, strict=True):
            size = len(text) + 1
            locs.append((size << 16) | (base + before))
            before += size
        return self._struct.pack(*fixed, *locs) + b"\0".join(texts) + b"\0"

    def size(self, texts: Sequence[bytes]) -> int:
        """The payload size :meth:`pack` would produce for these texts."""
        return self.header_size + sum(len(t) for t in texts) + len(texts)

    def unpack(self, record: bytes | memoryview, fmt: EventFormat) -> dict[str, object]:
        """The field values of one trace record (common header included), located by the
        tracepoint's ``format`` file: offsets and sizes, never our own assumptions.

        Raises ValueError if the format lacks a field of this schema or the record is
        too short for it.
        """
        return self.decoder(fmt)(record)

    def decoder(self, fmt: EventFormat) -> Callable[[bytes | memoryview], dict[str, object]]:
        """:meth:`unpack` for one format, with the field positions looked up once (the
        reader decodes many records of few formats). Raises ValueError if the format
        lacks a field of this schema or has it at another size."""
        plan = []
        for field in self.fields:
            try:
                where = fmt.field(field.name)
            except KeyError:
                raise ValueError(f"{fmt.name} has no field {field.name!r}") from None
            expected = struct.calcsize("<" + field.struct_code)
            if where.size != expected:
                raise ValueError(f"{fmt.name} has {field.name!r} of {where.size} bytes")
            kind = "text" if field.is_text else "chars" if field.type.startswith("char[") else ""
            plan.append((field.name, kind, where.offset, where.offset + where.size, where.signed))
        # One struct for the whole record, built from the format's offsets (gaps skipped):
        # the reader decodes hundreds of thousands of records a second this way.
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
        unpack = struct.Struct("".join(codes)).unpack_from
        needed = struct.calcsize("".join(codes))
        names = tuple(name for name, _, _ in order)
        texts = tuple((name, end) for name, kind, end in order if kind == "text")
        chars = tuple(name for name, kind, _ in order if kind == "chars")

        def decode(record: bytes | memoryview) -> dict[str, object]:
            size = len(record)
            if size < needed:
                raise ValueError(f"record of {size} bytes is too short for {fmt.name}")
            values = dict(zip(names, unpack(record), strict=True))
            for name, end in texts:
                loc = values[name]
                first = end + (loc & 0xFFFF)
                last = first + (loc >> 16) - 1
                if last >= size or last < first:
                    raise ValueError(f"{name!r} points outside the record")
                values[name] = str(record[first:last], "utf-8")
            for name in chars:
                values[name] = values[name].rstrip(b"\0").decode("ascii")
            return values

        return decode


_INT_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


def encode_plain(text: str) -> bytes:
    """A plain-text field: the UTF-8 text itself, readable in ``trace``, when that is
    lossless; otherwise (a NUL, a surrogate, a control character, or a leading ``"`` or
    ``{``) the JSON value encoding of the string, which starts with ``"`` or ``{``."""
    try:
        readable = text.isprintable() and not text.startswith(('"', "{"))
    except AttributeError:
        raise anyvalue.UnsupportedValue(
            f"a name or other plain-text field must be a str, not {type(text).__qualname__}"
        ) from None
    if readable:
        return text.encode("utf-8")
    return anyvalue.encode(text).encode("utf-8")


def decode_plain(text: str) -> str:
    """The inverse of :func:`encode_plain`."""
    if text.startswith(('"', "{")):
        value = anyvalue.decode(text)
        if not isinstance(value, str):
            raise ValueError(f"plain-text field holds a {type(value).__name__}")
        return value
    return text


def _fields(*specs: tuple[str, str, str]) -> list[Field]:
    return [Field(name, ftype, doc) for name, ftype, doc in specs]


_IDS_AND_SCOPE = (
    ("resource_id", "u64", "Identifies the resource, announced on the resource tracepoint."),
)

SPAN = Schema(
    "otel_span",
    _fields(
        ("start_time_ns", "u64", "Span start, ns since the Unix epoch."),
        ("end_time_ns", "u64", "Span end, ns since the Unix epoch."),
        ("duration_ns", "u64", "end_time_ns - start_time_ns (0 if negative), for filters."),
        *_IDS_AND_SCOPE,
        ("trace_id", "char[32]", "Trace id, 32 lowercase hex digits."),
        ("span_id", "char[16]", "Span id, 16 lowercase hex digits."),
        ("parent_span_id", "char[16]", "Parent span id; 16 zeros for a root span."),
        ("dropped_attributes", "u32", "Attributes the SDK dropped, plus any dropped to fit."),
        ("dropped_events", "u32", "Events the SDK dropped, plus any dropped to fit."),
        ("dropped_links", "u32", "Links the SDK dropped, plus any dropped to fit."),
        ("kind", "u8", "SpanKind: 0 internal, 1 server, 2 client, 3 producer, 4 consumer."),
        ("status_code", "u8", "StatusCode: 0 unset, 1 ok, 2 error."),
        ("trace_flags", "u8", "W3C trace flags (bit 0 sampled, bit 1 random)."),
        ("parent_flags", "u8", "Bit 0: has a parent; bit 1: the parent is remote."),
        ("truncated", "u8", "Bits of what was cut to fit the record size; see TRUNCATED."),
        ("name", TEXT, "Span name (plain text)."),
        ("status_description", TEXT, "Status description (plain text)."),
        ("trace_state", TEXT, "W3C tracestate header value."),
        ("attributes", TEXT, "Attributes, as a JSON object (value encoding)."),
        ("events", TEXT, "Events: JSON list of {name, time_ns, attributes, dropped}."),
        ("links", TEXT, "Links: JSON list of {trace_id, span_id, ...}."),
        ("scope", TEXT, "Instrumentation scope: JSON {name, version, schema_url, attributes}."),
    ),
    "One finished span.",
)

LOG = Schema(
    "otel_log",
    _fields(
        ("time_ns", "u64", "Timestamp, ns since the Unix epoch; 0 when the record has none."),
        ("observed_time_ns", "u64", "Observed timestamp, ns since the Unix epoch."),
        *_IDS_AND_SCOPE,
        ("trace_id", "char[32]", "Trace id of the record (32 hex digits), zeros if none."),
        ("span_id", "char[16]", "Span id of the record (16 hex digits), zeros if none."),
        ("dropped_attributes", "u32", "Attributes the SDK dropped, plus any dropped to fit."),
        ("severity_number", "u8", "SeverityNumber 1..24; 0 when unset."),
        ("trace_flags", "u8", "W3C trace flags of the record."),
        (
            "flags",
            "u8",
            "Bit 0: severity_text is set; bit 1: event_name is set; bit 2: body is set.",
        ),  # fmt: skip
        ("truncated", "u8", "Bits of what was cut to fit the record size; see TRUNCATED."),
        ("severity_text", TEXT, "Severity text (plain text)."),
        ("event_name", TEXT, "Event name (plain text)."),
        ("body", TEXT, "Body, any value, in the value encoding."),
        ("attributes", TEXT, "Attributes, as a JSON object (value encoding)."),
        ("scope", TEXT, "Instrumentation scope: JSON {name, version, schema_url, attributes}."),
    ),
    "One log record; one tracepoint per severity class (otel_log_info, ...).",
)

RESOURCE = Schema(
    "otel_resource",
    _fields(
        ("resource_id", "u64", "The id that spans and logs of this resource carry."),
        ("interval_ms", "u32", "How often the writer repeats this record while listened to."),
        ("attributes", TEXT, "Resource attributes, as a JSON object (value encoding)."),
        ("schema_url", TEXT, "Resource schema URL (plain text)."),
    ),
    "The resource of a process's spans and logs, announced instead of repeated per record.",
)

TRUNCATED_ATTRIBUTES = 1
TRUNCATED_EVENTS = 2
TRUNCATED_LINKS = 4
TRUNCATED_TEXT = 8
"""A plain-text field (name, body, ...) was cut; it ends with TRUNCATION_MARK."""
TRUNCATION_MARK = "…[truncated]"

SEVERITY_CLASSES = ("trace", "debug", "info", "warn", "error", "fatal")
"""Log tracepoints, one per class of four severity numbers (1-4 trace, ..., 21-24 fatal)."""


def severity_class(severity_number: int) -> str:
    """The class of a severity number; unset (0) and out-of-range numbers count as info."""
    if 1 <= severity_number <= 24:
        return SEVERITY_CLASSES[(severity_number - 1) // 4]
    return "info"


MAX_PAYLOAD = 4064
"""The largest payload (after the write index) ftrace keeps with its default 4 KiB
sub-buffers, measured on Linux 6.12: a larger one is dropped silently while writev still
reports success. perf keeps up to 8184 bytes."""
