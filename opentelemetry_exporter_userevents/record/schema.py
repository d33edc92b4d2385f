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

import hashlib
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry_exporter_userevents.abi.format import EventFormat
from opentelemetry_exporter_userevents.record.unpack import RecordUnpacker

_FIXED = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "s64": "q"}
TEXT = "__rel_loc char[]"


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    """The kernel type as written in the command: u8..u64, s64, char[N], TEXT, or
    ``__rel_loc u8[]`` (bytes, :mod:`.otlp_metrics`)."""
    doc: str

    @property
    def is_text(self) -> bool:
        return self.type == TEXT

    @property
    def struct_code(self) -> str:
        if self.is_text or self.type.startswith("__rel_loc"):
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
        self._pack = _packer(self._struct, self._loc_bases)

    def command(self, name: str | None = None) -> str:
        """The registration command: ``NAME type field; type field; ...``."""
        return f"{name or self.name} {self.field_list}"

    @property
    def field_list(self) -> str:
        """The command's fields: ``type field; type field; ...``."""
        return "; ".join(f"{f.type} {f.name}" for f in self.fields)

    @property
    def version(self) -> str:
        """8 hex digits that name this field list: the same in every process and release
        that has it, another for any change (docs/schema.md, "Versions")."""
        return hashlib.blake2b(self.field_list.encode(), digest_size=4).hexdigest()

    def pack(self, fixed: Sequence[object], texts: Sequence[bytes]) -> bytes:
        """A record payload from the fixed values and the texts (UTF-8, no NUL inside)."""
        return self._pack(fixed, texts)

    def size(self, texts: Sequence[bytes]) -> int:
        """The payload size :meth:`pack` would produce for these texts."""
        return self.header_size + len(texts) + sum(map(len, texts))

    def unpack(self, record: bytes | memoryview, fmt: EventFormat) -> dict[str, Any]:
        """The field values of one trace record (common header included), located by the
        tracepoint's ``format`` file: offsets and sizes, never our own assumptions.

        Raises ValueError if the format lacks a field of this schema or the record is
        too short for it.
        """
        return self.unpacker(fmt).unpack(record)

    def unpacker(self, fmt: EventFormat) -> RecordUnpacker:
        """A :class:`RecordUnpacker` for records of ``fmt``, the field positions looked up
        once (the reader decodes many records of few formats). Raises ValueError if the
        format lacks a field of this schema or has it at another size."""
        return RecordUnpacker(self, fmt)


def _packer(
    layout: struct.Struct, loc_bases: tuple[int, ...]
) -> Callable[[Sequence[object], Sequence[bytes]], bytes]:
    """``pack`` for one schema, its ``__rel_loc`` arithmetic unrolled (as ``dataclasses``
    writes ``__init__``): a loop over the texts cost half of packing a span. Text ``i``'s
    slot is ``size << 16 | offset``, the offset counted from just past the slot."""
    count = len(loc_bases)
    lines = ["def pack(fixed, texts):"]
    if count:
        lines.append("    " + "".join(f"t{i}, " for i in range(count)) + "= texts")
    locs = []
    for i, base in enumerate(loc_bases):
        lines.append(f"    s{i} = len(t{i}) + 1")
        before = " + ".join(f"s{j}" for j in range(i)) or "0"
        locs.append(f"s{i} << 16 | ({base} + {before})")
    lines.append(f"    return _pack(*fixed, {', '.join(locs)}) + _join(texts) + b'\\0'")
    namespace: dict[str, Any] = {"_pack": layout.pack, "_join": b"\0".join}
    exec("\n".join(lines), namespace)  # noqa: S102 - generated from the schema alone
    return namespace["pack"]  # type: ignore[no-any-return]


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
        ("parent_flags", "u8", "Bit 0: has a parent; bit 1: the parent is remote (record.flags)."),
        ("truncated", "u8", "Bits of what was cut to fit the record size; see record.flags."),
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
        ("truncated", "u8", "Bits of what was cut to fit the record size; see record.flags."),
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

_POINT_HEAD = (
    ("start_time_ns", "u64", "Start of the point's interval, ns since the Unix epoch."),
    ("time_ns", "u64", "End of the point's interval (collection time), ns since the Unix epoch."),
    *_IDS_AND_SCOPE,
)
_METRIC_KIND = ("kind", "u8", "Metric type: 1 sum, 2 gauge, 3 histogram, 4 exponential histogram.")
_TEMPORALITY = (
    "temporality",
    "u8",
    "AggregationTemporality: 0 none (gauges), 1 delta, 2 cumulative.",
)
_POINT_DROPS = (
    ("dropped_attributes", "u32", "Attributes dropped to fit or as unencodable."),
    ("dropped_exemplars", "u32", "Exemplars dropped to fit or as unencodable."),
)
_METRIC_TAIL = (
    ("scope", TEXT, "Instrumentation scope: JSON {name, version, schema_url, attributes}."),
    ("description", TEXT, "Metric description (plain text)."),
    ("unit", TEXT, "Metric unit (plain text)."),
)
_EXEMPLARS = (
    "exemplars",
    TEXT,
    "Exemplars: JSON list of {time_ns, value, attributes, trace_id?, span_id?}.",
)

METRIC_NUMBER = Schema(
    "otel_metric_number",
    _fields(
        *_POINT_HEAD,
        (
            "value",
            "s64",
            "The value if an integer in s64 (flags bit 0), else the double cut "
            "toward zero and clamped to s64 (0 for NaN), for filters.",
        ),
        ("value_bits", "u64", "The value as an IEEE-754 double, its 64 bits (exact for doubles)."),
        *_POINT_DROPS,
        _METRIC_KIND,
        _TEMPORALITY,
        ("is_monotonic", "u8", "1 for a monotonic sum; 0 otherwise."),
        ("flags", "u8", "Bit 0: the value is an integer; bit 1: outside s64, see value_text."),
        ("truncated", "u8", "Bits of what was cut to fit the record size; see record.flags."),
        ("name", TEXT, "Metric name (plain text)."),
        ("attributes", TEXT, "Point attributes, as a JSON object (value encoding)."),
        _EXEMPLARS,
        ("value_text", TEXT, "An integer value outside s64 in the value encoding; else empty."),
        *_METRIC_TAIL,
    ),
    "One data point of a sum or gauge: ``otel_metric_sum`` and ``otel_metric_gauge``.",
)

METRIC_HISTOGRAM = Schema(
    "otel_metric_histogram",
    _fields(
        *_POINT_HEAD,
        ("count", "u64", "Number of measurements."),
        ("sum_bits", "u64", "Sum: IEEE-754 double bits, or s64 if flags bit 0."),
        ("min_bits", "u64", "Minimum: IEEE-754 double bits, or s64 if flags bit 1."),
        ("max_bits", "u64", "Maximum: IEEE-754 double bits, or s64 if flags bit 2."),
        *_POINT_DROPS,
        _METRIC_KIND,
        _TEMPORALITY,
        ("flags", "u8", "Bits 0, 1, 2: sum, min, max are integers (s64), not doubles."),
        ("truncated", "u8", "Bits of what was cut to fit the record size; see record.flags."),
        ("name", TEXT, "Metric name (plain text)."),
        ("attributes", TEXT, "Point attributes, as a JSON object (value encoding)."),
        (
            "buckets",
            TEXT,
            "JSON: {bounds, counts} or {scale, zero_count, positive, negative, "
            "flags}, see docs/schema.md.",
        ),
        _EXEMPLARS,
        *_METRIC_TAIL,
    ),
    "One data point of a histogram: ``otel_metric_histogram`` and ``otel_metric_exp_histogram``.",
)

ANNOUNCE_REGISTERED = 0
"""An announcement's ``event``: the writer registered its tracepoints and waits up to
``wait_ms`` for them to be listened to before its first write."""
ANNOUNCE_GAVE_UP = 1
"""An announcement's ``event``: ``wait_ms`` passed and some of the writer's tracepoints were
still not listened to; it writes on, and what nobody listens to is not recorded."""

ANNOUNCE = Schema(
    "otel_userevents_announce",
    _fields(
        ("wait_ms", "u32", "How long the writer waits for its tracepoints to be listened to."),
        ("event", "u8", "0: registered, waiting; 1: gave up waiting (see ANNOUNCE_*)."),
        ("prefix", TEXT, "The prefix of the tracepoints the writer registered."),
    ),
    "A writer's word to a machine-wide reader: one prefix's tracepoints now exist. One "
    "tracepoint for every prefix, whatever the prefix (docs/schema.md, Announcements).",
)
