# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Shape-level fuzzing: genuine records, encoded by the exporters' own encoders from what
an app handed to the SDK, with ONE field replaced by well-formed text of a wrong shape
(lists for objects, strings for lists, numbers for strings, null, nested wrong shapes,
unknown ``~x`` tags, ``~b`` with bad base64, ids that are not lowercase hex, enums out of
range, terminal escapes, lone surrogates, huge nesting), or by text that is not the value
encoding at all.

A :class:`Hostile` says which record it came from, which field was replaced and the prefix
every reason for refusing it must start with (``span.events[].name``), so a test can check
that the reader counts it under that field, or rebuilds it if the wrong shape happens to be
acceptable (an extra key, an attribute value of any shape).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import Exemplar
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Buckets,
    ExponentialHistogramDataPoint,
    HistogramDataPoint,
    NumberDataPoint,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from opentelemetry_exporter_userevents._export.log_encoder import encode_log
from opentelemetry_exporter_userevents._export.metric_encoder import PointItem, encode_point
from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint
from opentelemetry_exporter_userevents.record import anyvalue, schema
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.flags import METRIC_VALUE_BIG, PARENT_PRESENT
from opentelemetry_exporter_userevents.record.plain_text import encode_plain
from opentelemetry_exporter_userevents.record.resource_id import hash_resource
from opentelemetry_exporter_userevents.record.tracepoints import (
    METRIC_EXP_HISTOGRAM_KIND,
    METRIC_GAUGE_KIND,
    METRIC_HISTOGRAM_KIND,
    METRIC_KINDS,
    METRIC_SUM_KIND,
)
from tests.support.records import HEADER, format_of

APP_PID = 42
"""The genuine app (tests.support.records.HEADER's common_pid)."""
HOSTILE_PID = 666

# --- the genuine app: what it handed to the SDK, and its records ------------------------

RESOURCE = Resource(
    {"service.name": "shape-svc", "host.name": "h\x1b[2Jx", "pid": 4242, "tags": ("a", "b")},
    schema_url="https://opentelemetry.io/schemas/1.21.0",
)
SCOPE_ATTRIBUTES = {"scope.attr": True, "lib": "http"}
TRACEPOINTS = {
    "span": "otel_span.1",
    "log": "otel_log_info.1",
    "resource": "otel_resource.1",
    METRIC_SUM_KIND: "otel_metric_sum.1",
    METRIC_GAUGE_KIND: "otel_metric_gauge.1",
    METRIC_HISTOGRAM_KIND: "otel_metric_histogram.1",
    METRIC_EXP_HISTOGRAM_KIND: "otel_metric_exp_histogram.1",
}
SCHEMAS = {
    "span": schema.SPAN,
    "log": schema.LOG,
    "resource": schema.RESOURCE,
    **METRIC_KINDS,
}


def _spans() -> list[Any]:
    """(first genuine, second genuine, hostile base): a client span, then its server parent
    (children end first), then a span of another trace with events and links."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("lib.shape", "1.0", "https://x/s", attributes=SCOPE_ATTRIBUTES)
    remote = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, True,
                         TraceFlags(1), TraceState([("vendor", "v1")]))  # fmt: skip
    linked = SpanContext(0x1234, 0x5678, False, TraceFlags(1), TraceState([("a", "1")]))
    context = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    with tracer.start_as_current_span(
        "GET /users/\x1b[31m{id}", context=context, kind=SpanKind.SERVER,
        attributes={"http.method": "GET", "n": 200, "ratio": 0.25, "ok": True,
                    "list": ("a", "b"), "esc\x9b": "\u202eevil"},
        links=[Link(linked, {"link.attr": "x"})],
    ) as server:  # fmt: skip
        server.add_event("cache miss\n", {"key": "user:1", "n": 3})
        with tracer.start_as_current_span("SELECT users", kind=SpanKind.CLIENT) as child:
            child.set_status(Status(StatusCode.ERROR, "connection reset\x1b]0;x\x07"))
            child.add_event("retry", {"attempt": 2})
    with tracer.start_as_current_span(
        "base", kind=SpanKind.PRODUCER, attributes={"k": "v"},
        links=[Link(linked, {"l": 1}), Link(remote)],
    ) as base:  # fmt: skip
        base.add_event("one", {"e": 1})
        base.add_event("two")
    provider.shutdown()
    child_span, server_span, base_span = memory.get_finished_spans()
    return [child_span, server_span, base_span]


def _logs() -> list[Any]:
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger("lib.log", "0.1", attributes=SCOPE_ATTRIBUTES)
    tracer = TracerProvider(resource=RESOURCE).get_tracer("t")
    with tracer.start_as_current_span("work"):
        logger.emit(
            timestamp=1_700_000_000_000_000_000,
            observed_timestamp=1_700_000_000_000_000_001,
            severity_number=SeverityNumber.WARN,
            severity_text="WARN\x1b[0m",
            body={"msg": "disk \x9b full", "n": [1, 2]},
            attributes={"a": 1, "b": ("x", "y")},
            event_name="disk.full",
        )
        logger.emit(observed_timestamp=1_700_000_000_000_000_002,
                    severity_number=SeverityNumber.ERROR, body="plain\nbody",
                    attributes={"c": 2.5})  # fmt: skip
    logger.emit(observed_timestamp=1_700_000_000_000_000_003,
                severity_number=SeverityNumber.INFO, severity_text="INFO", body="base",
                attributes={"base": True}, event_name="base.event")  # fmt: skip
    provider.shutdown()
    return list(memory.get_finished_logs())


_SCOPE = InstrumentationScope("lib.meter", "2.0", "https://x/m", SCOPE_ATTRIBUTES)
_T0, _T1 = 1_700_000_000_000_000_000, 1_700_000_010_000_000_000


def _exemplars(n: int) -> list[Exemplar]:
    return [
        Exemplar({"ex": n}, 1.5 + n, _T1 - 5, 0x0102030405060708 + n, 0xABCDEF + n),
        Exemplar({}, n, _T1 - 4, None, None),
    ]


def _point(kind: str, n: int) -> Any:
    attributes = {"route": f"/r{n}", "n": n}
    if kind == METRIC_SUM_KIND:
        return NumberDataPoint(attributes, _T0, _T1, 10 + n, _exemplars(n))
    if kind == METRIC_GAUGE_KIND:
        return NumberDataPoint(attributes, _T0, _T1, 0.5 + n, _exemplars(n))
    if kind == METRIC_HISTOGRAM_KIND:
        return HistogramDataPoint(attributes, _T0, _T1, 6, 12.5, (1, 2, 3), (1.0, 5.0), 0.5,
                                  9.0, _exemplars(n))  # fmt: skip
    return ExponentialHistogramDataPoint(
        attributes,
        _T0,
        _T1,
        7,
        20.0,
        3,
        1,
        Buckets(-2, [1, 2, 1]),
        Buckets(1, [2]),
        0,
        -3.0,
        8.0,
        _exemplars(n),
    )


_METRIC_SHAPES = {
    METRIC_SUM_KIND: (mv.KIND_SUM, 2, True),
    METRIC_GAUGE_KIND: (mv.KIND_GAUGE, 0, False),
    METRIC_HISTOGRAM_KIND: (mv.KIND_HISTOGRAM, 1, False),
    METRIC_EXP_HISTOGRAM_KIND: (mv.KIND_EXP_HISTOGRAM, 2, False),
}


def _items(kind: str) -> list[PointItem]:
    number, temporality, monotonic = _METRIC_SHAPES[kind]
    return [
        PointItem(
            RESOURCE,
            _SCOPE,
            f"shape.{kind}\x1b",
            "d\x9b",
            "ms",
            _point(kind, n),
            number,
            temporality,
            monotonic,
        )  # fmt: skip
        for n in range(3)
    ]


def as_metric_point(item: PointItem) -> MetricPoint:
    """What the app's SDK had for a point, as the reader's type (for metrics_request)."""
    temporality = AggregationTemporality(item.temporality) if item.temporality else None
    return MetricPoint(
        item.resource,
        item.scope,
        item.name,
        item.description or "",
        item.unit or "",
        item.kind,
        temporality,
        item.monotonic,
        item.point,
    )


def _resource_texts() -> tuple[bytes, bytes]:
    return anyvalue.encode(dict(RESOURCE.attributes)).encode(), encode_plain(RESOURCE.schema_url)


RESOURCE_ATTRIBUTES, RESOURCE_SCHEMA_URL = _resource_texts()
RESOURCE_ID = hash_resource(RESOURCE_ATTRIBUTES, RESOURCE_SCHEMA_URL)
RESOURCE_PAYLOAD = schema.RESOURCE.pack(
    (RESOURCE_ID, 1000), (RESOURCE_ATTRIBUTES, RESOURCE_SCHEMA_URL)
)


@dataclass(frozen=True)
class Genuine:
    """One kind's app objects (first, second, base of the hostile record), their payloads."""

    kind: str
    originals: list[Any]
    payloads: list[bytes]


def _genuine() -> dict[str, Genuine]:
    found = {}
    spans = _spans()
    found["span"] = Genuine(
        "span", spans, [encode_span(s, RESOURCE_ID, FTRACE_MAX_PAYLOAD)[0] for s in spans]
    )
    logs = _logs()
    found["log"] = Genuine(
        "log", logs, [encode_log(r, RESOURCE_ID, FTRACE_MAX_PAYLOAD)[0] for r in logs]
    )
    for kind in _METRIC_SHAPES:
        items = _items(kind)
        payloads = [encode_point(i, RESOURCE_ID, FTRACE_MAX_PAYLOAD)[0] for i in items]
        found[kind] = Genuine(kind, items, payloads)
    return found


GENUINE = _genuine()


def unpack(kind: str, payload: bytes) -> dict[str, Any]:
    """A payload's values as the reader's decoder gives them (format as the kernel shows)."""
    record_schema = SCHEMAS[kind]
    return record_schema.unpack(HEADER + payload, format_of(record_schema, TRACEPOINTS[kind]))


def trace_record(kind: str, values: dict[str, Any], pid: int, timestamp: int = 0) -> TraceRecord:
    base = "resource" if kind == "resource" else kind
    return TraceRecord(timestamp, base, TRACEPOINTS[kind], pid, values)


def repack(kind: str, values: dict[str, Any]) -> bytes | None:
    """The payload a writer would write for ``values``; None if the kernel could not take it
    (a text not UTF-8 or holding a NUL, a ``char[N]`` too long, a number out of its range)."""
    record_schema = SCHEMAS[kind]
    fixed, texts = [], []
    try:
        for item in record_schema.fields:
            value = values[item.name]
            if item.is_text:
                data = value.encode("utf-8")
                if b"\0" in data:
                    return None
                texts.append(data)
            elif item.type.startswith("char["):
                data = value.encode("utf-8")
                if len(data) > int(item.type[5:-1]) or b"\0" in data:
                    return None
                fixed.append(data)
            else:
                fixed.append(value)
        payload = record_schema.pack(fixed, texts)
    except (UnicodeEncodeError, ValueError, OverflowError, Exception):  # noqa: BLE001
        return None
    return payload if len(payload) <= 3900 else None


# --- wrong shapes -----------------------------------------------------------------------

ESCAPES = ["\x1b[31m", "\x1b]0;pwned\x07", "\x9b2J", "\u202e", "\x00", "\ud800", "\udfff",
           "\u2028", "\n", "\r\n", "\x85", "\x7f"]  # fmt: skip
"""What a writer would like to reach the operator's terminal: ESC, C1 CSI, direction and
line marks, NUL (``\\u0000`` in JSON), lone surrogates (``\\ud800`` in JSON)."""

hostile_strings = st.one_of(
    st.sampled_from(ESCAPES),
    st.lists(st.sampled_from(ESCAPES + ["a", "~", "é", "0", "{", '"']), max_size=6).map("".join),
    st.text(st.characters(exclude_categories=()), max_size=6),
)
_tags = st.one_of(
    st.builds(lambda s: {"~b": s}, st.sampled_from(["!!", "a", "YQ", "YQ=", "YQ===", "é", "Y Q="])),
    st.builds(lambda v: {"~b": v}, st.sampled_from([1, None, [], {}])),
    st.builds(
        lambda t, v: {t: v},
        st.sampled_from(["~x", "~", "~B", "~~b~", "~bb", "~ "]),
        st.integers() | st.text(max_size=3),
    ),  # fmt: skip
    st.builds(lambda v: {"~f": v}, st.sampled_from(["nan", "inf", "1.5", 1.5, None, "NaN "])),
    st.builds(lambda v: {"~i": v}, st.sampled_from(["zz", "0x", "", 5, "0x1g", "١"])),
    st.builds(lambda v: {"~s": v}, st.sampled_from(["a", [1], ["a", None], {}])),
    st.builds(lambda v: {"~m": v}, st.sampled_from([1, [[1, 2]], [["a"]], [[["a"], 1]], "x"])),
    st.builds(lambda t: {t: "YQ==", "x": 1}, st.sampled_from(["~b", "~s", "~f"])),
)
"""Unknown ``~x`` tags, known tags holding the wrong thing, ``~b`` with bad base64, and
tags sharing their object with another key: none is in the value encoding."""
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([-1, 0, 2**32, 2**64, -(2**64), 2**64 - 1, 10**40]),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_strings,
)
wrong_values = st.recursive(
    json_scalars | _tags,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(
            hostile_strings | st.sampled_from(["name", "~x", "~~y"]), children, max_size=3
        ),  # fmt: skip
    ),
    max_leaves=6,
)
"""A JSON value of any shape, as it is written in the text (tags are tags)."""


def deep(depth: int, inner: Any = 1, kind: str = "list") -> Any:
    value = inner
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


deep_values = st.builds(deep, st.sampled_from([63, 64, 65, 100]), st.just(1),
                        st.sampled_from(["list", "dict"]))  # fmt: skip
"""Nesting about MAX_DEPTH (64): a value of at most 900 levels stays within a record."""

RAW_TEXTS = [
    "", " ", "{", "[", "[1,", '{"a":1', "}", "nul", "NaN", "Infinity", "-Infinity", "1e999",
    '{"a":NaN}', "[Infinity]", '"\x1b[31m"', '{"\x1b":1}', '"\x9b"', '"\u202e"', '"\\ud800"',
    '"\\u0000"', "\ufeff{}", "{} x", "[] []", '{"a":1,"a":2}', '{"~~":1}', "'a'", "0x10",
    "[" * 1200 + "]" * 1200, '{"a":' * 700 + "1" + "}" * 700, '"' + "\\" * 3 + '"',
    "\x1b[2J", '"\\uDEAD"', '"\\ud83d\\ude00"', "tru", "nul\x00l",
]  # fmt: skip
"""Texts that are not the value encoding of anything (or, by chance, are)."""

HEX_LIKE = [
    "ABCDEF0123456789", "0x", " ", "g", "-1", "０", "٠", "é", "\x1b", "\u202e", "\ud800",
]  # fmt: skip


def bad_hex_text(length: int, all_zero_ok: bool = False) -> st.SearchStrategy[str]:
    """Texts that are not ``length`` lowercase hex digits: uppercase, wrong length,
    non-ASCII digits, escapes; all zeros (a valid but invalid id) if ``all_zero_ok``."""
    good = "0123456789abcdef"
    return st.one_of(
        st.text("0123456789ABCDEF", min_size=length, max_size=length).map(
            lambda t: t if t != t.lower() else "A" + t[1:]
        ),
        st.text(good, min_size=0, max_size=length + 4).filter(lambda t: len(t) != length),
        st.builds(
            lambda prefix, char, suffix: (prefix + char + suffix)[:length].ljust(length, "0"),
            st.text(good, max_size=length - 1),
            st.sampled_from(HEX_LIKE[1:]),
            st.text(good, max_size=length),
        ),
        st.sampled_from(
            ["0x" + "1" * (length - 2), "1" * (length - 1) + "\n", " " + "1" * (length - 1)]
        ),
        st.just("0" * length) if all_zero_ok else st.nothing(),
    )


def bad_hex(length: int) -> st.SearchStrategy[Any]:
    """:func:`bad_hex_text`, all zeros, and values of other types."""
    return st.one_of(
        bad_hex_text(length, all_zero_ok=True),
        st.integers(0, 2**130),
        st.none(),
        st.booleans(),
        st.lists(st.integers(0, 15), max_size=3),
    )


bad_counts = st.one_of(
    st.sampled_from([-1, 2**64, 2**64 + 5, -(2**70), 1.0, 0.5, True, False, "1", "", None]),
    st.lists(st.integers(0, 3), max_size=2),
    st.just({}),
    wrong_values,
)
bad_u32 = st.sampled_from([2**32, 2**32 + 1, -1, 1.5, True, "3", None]) | bad_counts
bad_strings = wrong_values.filter(lambda v: type(v) is not str) | _tags
bad_objects = wrong_values.filter(lambda v: type(v) is not dict) | _tags
bad_lists = wrong_values.filter(lambda v: type(v) is not list) | _tags
bad_numbers = st.one_of(
    st.sampled_from([True, False, None, "1.5", "NaN", [], {}]),
    _tags,
    st.builds(lambda v: {"~f": v}, st.sampled_from(["NaN", "Infinity"])),
    wrong_values,
)
bad_booleans = st.sampled_from([0, 1, "true", None, [], {}, "false"]) | wrong_values
bad_tracestates = st.one_of(
    st.sampled_from(
        [
            "A=1",
            "a",
            "a=1,a=2",
            "=1",
            "a=\x1b",
            ",".join(f"k{n}=v" for n in range(33)),
            "a=1 , b",
            "a=" + "x" * 300,
            "a=\u202e",
        ]
    ),  # fmt: skip
    bad_strings,
)
counts_lists = st.one_of(
    st.lists(st.sampled_from([-1, 2**64, 1.5, True, "1", None, [1]]), min_size=1, max_size=3),
    bad_lists,
)
number_lists = st.one_of(
    st.lists(
        st.sampled_from([True, "1", None, [1], {"~f": "NaN"}, {"~i": "0x1"}]),
        min_size=1,
        max_size=3,
    ),  # fmt: skip
    bad_lists,
)
MISSING = object()
"""Replacement that deletes a key."""

SHAPES: dict[str, st.SearchStrategy[Any]] = {
    "object": bad_objects | deep_values | st.just(MISSING),
    "list": bad_lists | deep_values | st.just(MISSING),
    "string": bad_strings | st.just(MISSING),
    "optional string": bad_strings,
    "count": bad_counts | st.just(MISSING),
    "u32": bad_u32,
    "int": bad_numbers.filter(lambda v: type(v) is not int) | st.just(MISSING),
    "number": bad_numbers | st.just(MISSING),
    "bool": bad_booleans | st.just(MISSING),
    "hex32": bad_hex(32) | st.just(MISSING),
    "hex16": bad_hex(16) | st.just(MISSING),
    "optional hex32": bad_hex(32),
    "optional hex16": bad_hex(16),
    "tracestate": bad_tracestates | st.just(MISSING),
    "counts": counts_lists | st.just(MISSING),
    "numbers": number_lists | st.just(MISSING),
    "any": wrong_values | deep_values,
}

# Per kind: (top-level text field, path inside it, the shape the schema gives it). A path
# element "[]" is every item of a list (one is replaced), a str a key of an object.
_SCOPE_FIELDS = [
    ("scope", (), "object"),
    ("scope", ("name",), "string"),
    ("scope", ("version",), "optional string"),
    ("scope", ("schema_url",), "optional string"),
    ("scope", ("attributes",), "object"),
    ("scope", ("extra",), "any"),
]
_EXEMPLAR_FIELDS = [
    ("exemplars", (), "list"),
    ("exemplars", ("[]",), "object"),
    ("exemplars", ("[]", "time_ns"), "count"),
    ("exemplars", ("[]", "value"), "number"),
    ("exemplars", ("[]", "attributes"), "object"),
    ("exemplars", ("[]", "trace_id"), "optional hex32"),
    ("exemplars", ("[]", "span_id"), "optional hex16"),
    ("exemplars", ("[]", "extra"), "any"),
]
_METRIC_COMMON = [("attributes", (), "object"), *_EXEMPLAR_FIELDS, *_SCOPE_FIELDS]
TEXT_FIELDS: dict[str, list[tuple[str, tuple[str, ...], str]]] = {
    "span": [
        ("attributes", (), "object"),
        ("attributes", ("extra",), "any"),
        ("events", (), "list"),
        ("events", ("[]",), "object"),
        ("events", ("[]", "name"), "string"),
        ("events", ("[]", "time_ns"), "count"),
        ("events", ("[]", "attributes"), "object"),
        ("events", ("[]", "dropped"), "u32"),
        ("events", ("[]", "extra"), "any"),
        ("links", (), "list"),
        ("links", ("[]",), "object"),
        ("links", ("[]", "trace_id"), "hex32"),
        ("links", ("[]", "span_id"), "hex16"),
        ("links", ("[]", "trace_flags"), "count"),
        ("links", ("[]", "trace_state"), "tracestate"),
        ("links", ("[]", "is_remote"), "bool"),
        ("links", ("[]", "attributes"), "object"),
        ("links", ("[]", "dropped"), "u32"),
        ("links", ("[]", "extra"), "any"),
        *_SCOPE_FIELDS,
    ],
    "log": [
        ("attributes", (), "object"),
        ("attributes", ("extra",), "any"),
        ("body", (), "any"),
        *_SCOPE_FIELDS,
    ],
    "resource": [("attributes", (), "object"), ("attributes", ("extra",), "any")],
    METRIC_SUM_KIND: [*_METRIC_COMMON, ("value_text", (), "int")],
    METRIC_GAUGE_KIND: [*_METRIC_COMMON, ("value_text", (), "int")],
    METRIC_HISTOGRAM_KIND: [
        *_METRIC_COMMON,
        ("buckets", (), "object"),
        ("buckets", ("bounds",), "numbers"),
        ("buckets", ("counts",), "counts"),
        ("buckets", ("extra",), "any"),
    ],
    METRIC_EXP_HISTOGRAM_KIND: [
        *_METRIC_COMMON,
        ("buckets", (), "object"),
        ("buckets", ("scale",), "int"),
        ("buckets", ("zero_count",), "count"),
        ("buckets", ("flags",), "count"),
        ("buckets", ("positive",), "object"),
        ("buckets", ("negative",), "object"),
        ("buckets", ("positive", "offset"), "int"),
        ("buckets", ("positive", "counts"), "counts"),
        ("buckets", ("negative", "offset"), "int"),
        ("buckets", ("negative", "counts"), "counts"),
    ],
}
FIXED_FIELDS: dict[str, list[tuple[str, st.SearchStrategy[Any]]]] = {
    "span": [
        ("trace_id", bad_hex_text(32)),
        ("span_id", bad_hex_text(16)),
        ("parent_span_id", bad_hex_text(16)),
        ("kind", st.integers(5, 255)),
        ("status_code", st.integers(3, 255)),
    ],
    "log": [
        ("trace_id", bad_hex_text(32)),
        ("span_id", bad_hex_text(16)),
        ("severity_number", st.integers(25, 255)),
    ],
    "resource": [],
    **{
        kind: [("temporality", st.integers(3, 255))]
        for kind in (
            METRIC_SUM_KIND,
            METRIC_GAUGE_KIND,
            METRIC_HISTOGRAM_KIND,
            METRIC_EXP_HISTOGRAM_KIND,
        )  # fmt: skip
    },
}
_SURROGATES = re.compile("[\ud800-\udfff]")


def json_text(value: Any, ascii_only: bool) -> str:
    """``value`` as JSON text that is valid UTF-8: lone surrogates as ``\\uXXXX``."""
    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"), allow_nan=False)
    return _SURROGATES.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def reason_kind(kind: str) -> str:
    return "metric" if kind in METRIC_KINDS else kind


@dataclass
class Hostile:
    """One genuine record with one field replaced."""

    kind: str
    """The record's kind (``span``, ``log``, ``resource``, a metric kind)."""
    field: str
    """The record field replaced (``events``, ``trace_id``, ...)."""
    where: str
    """What every reason to refuse it starts with: ``span.events[].name``."""
    values: dict[str, Any]
    replacement: Any = field(repr=True, default=None)

    @property
    def record_kind(self) -> str:
        return reason_kind(self.kind)

    def allowed(self, reason: str) -> bool:
        """Whether ``reason`` names the replaced field."""
        top = f"{self.record_kind}.{self.field}"
        return reason.startswith(self.where) or reason == f"{top}: not in the value encoding"


def _replace(raw: Any, path: tuple[str, ...], new: Any, index: int) -> Any:
    """``raw`` (a decoded JSON text, tags as they are written) with the value at ``path``
    replaced by ``new`` (deleted if MISSING)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if head == "[]":
        if type(raw) is not list or not raw:
            return raw
        at = index % len(raw)
        if not rest and new is MISSING:
            del raw[at]
        else:
            raw[at] = _replace(raw[at], rest, new, index)
        return raw
    if not rest and new is MISSING:
        raw.pop(head, None)
    else:
        raw[head] = _replace(raw.get(head), rest, new, index) if rest else new
    return raw


def _copy(value: Any) -> Any:
    return value if value is MISSING else copy.deepcopy(value)


def _where(kind: str, top: str, path: tuple[str, ...]) -> str:
    where = f"{reason_kind(kind)}.{top}"
    for part in path:
        where += "[]" if part == "[]" else f".{part}"
    return where


@st.composite
def hostile_records(draw: st.DrawFn, kinds: tuple[str, ...] | None = None) -> Hostile:
    """A genuine record (the base app object of one kind) with one field of a wrong shape."""
    kind = draw(st.sampled_from(kinds or tuple(TRACEPOINTS)))
    if kind == "resource":
        return draw(hostile_resources())
    values = unpack(kind, GENUINE[kind].payloads[2])
    fixed = FIXED_FIELDS[kind]
    choice = draw(st.integers(0, len(TEXT_FIELDS[kind]) + len(fixed) - 1))
    if choice >= len(TEXT_FIELDS[kind]):
        name, strategy = fixed[choice - len(TEXT_FIELDS[kind])]
        new = draw(strategy)
        values[name] = new
        if name == "parent_span_id":  # read only when the span has a parent
            values["parent_flags"] |= PARENT_PRESENT
        return Hostile(kind, name, _where(kind, name, ()), values, new)
    top, path, shape = TEXT_FIELDS[kind][choice]
    if top == "value_text":
        values["flags"] |= METRIC_VALUE_BIG
    if draw(st.integers(0, 9)) == 0 and not path:
        text = draw(st.sampled_from(RAW_TEXTS))  # not JSON, or not the value encoding
        new = text
    else:
        new = draw(SHAPES[shape])
        raw = json.loads(values[top]) if values[top] else None
        new_raw = _replace(raw, path, _copy(new), draw(st.integers(0, 3)))
        if new_raw is MISSING:
            new_raw = {} if shape == "object" else None
        text = json_text(new_raw, draw(st.booleans()))
    values[top] = text
    return Hostile(kind, top, _where(kind, top, path), values, new)


@st.composite
def hostile_resources(draw: st.DrawFn) -> Hostile:
    """The app's resource record with its attributes or schema_url of a wrong shape (its
    id the hash of the new texts), or its texts with an id that is not their hash."""
    attributes, schema_url = RESOURCE_ATTRIBUTES.decode(), RESOURCE_SCHEMA_URL.decode()
    what = draw(st.sampled_from(["attributes", "schema_url", "resource_id"]))
    new: Any
    if what == "attributes":
        top, path, shape = draw(st.sampled_from(TEXT_FIELDS["resource"]))
        if draw(st.integers(0, 9)) == 0 and not path:
            attributes = new = draw(st.sampled_from(RAW_TEXTS))
        else:
            new = draw(SHAPES[shape])
            raw = _replace(json.loads(attributes), path, _copy(new), 0)
            attributes = json_text({} if raw is MISSING else raw, draw(st.booleans()))
        where = _where("resource", "attributes", path)
    elif what == "schema_url":
        # A plain text is itself unless it starts with '"' or '{': then the value encoding
        # of a string.
        value = draw(wrong_values | st.sampled_from(RAW_TEXTS).map(lambda t: ("raw", t)))
        if type(value) is tuple:
            schema_url = new = '"' + value[1]
        else:
            schema_url = new = json_text(value, draw(st.booleans()))
        where = "resource.schema_url"
    rid = hash_resource(attributes.encode("utf-8", "surrogatepass"),
                        schema_url.encode("utf-8", "surrogatepass"))  # fmt: skip
    if what == "resource_id":
        new = rid = draw(
            st.sampled_from([RESOURCE_ID, 0, 1, RESOURCE_ID ^ 1, 2**64 - 1])
            | st.integers(0, 2**64 - 1)
        )
        attributes = json_text(
            {**json.loads(attributes), "extra": draw(st.integers())}, draw(st.booleans())
        )
        where = "resource.resource_id"
    values = {"resource_id": rid, "interval_ms": 1000, "attributes": attributes,
              "schema_url": schema_url}  # fmt: skip
    return Hostile("resource", what, where, values, new)
