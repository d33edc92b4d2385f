# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Bad and extreme input to the exporters: never an exception into the application, never
a record the kernel would refuse or a reader could not decode, every record accounted for."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsSpanExporter,
)
from opentelemetry_exporter_userevents._export.log_encoder import encode_log
from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.record import anyvalue, flags, tracepoints
from opentelemetry_exporter_userevents.record.plain_text import decode_plain
from opentelemetry_exporter_userevents.record.schema import LOG, SPAN
from tests.support.fake_kernel import FakeKernel
from tests.support.otel_strategies import log_records, one_of_each_category, spans
from tests.support.records import (
    check_cut_log,
    check_cut_span,
    check_log,
    check_span,
    unpack_log,
    unpack_span,
)

SIZES = (1024, FTRACE_MAX_PAYLOAD, 8184)
CONTEXT = SpanContext(0xABC, 0xDEF, is_remote=False)
SCOPE = InstrumentationScope("scope", "1.0")
MARK = flags.TRUNCATION_MARK


@settings(max_examples=300, deadline=None)
@given(span=spans(), max_size=st.sampled_from(SIZES))
def test_any_span_round_trips_or_is_cut_with_counts(span, max_size):
    payload, truncated = encode_span(span, 7, max_size)

    assert len(payload) <= max_size
    values = unpack_span(payload)
    if truncated:
        check_cut_span(values, span)
    else:
        check_span(values, span, 7)


@settings(max_examples=300, deadline=None)
@given(readable=log_records(), max_size=st.sampled_from(SIZES))
def test_any_log_record_round_trips_or_is_cut_with_counts(readable, max_size):
    payload, truncated = encode_log(readable, 7, max_size)

    assert len(payload) <= max_size
    values = unpack_log(payload)
    if truncated:
        check_cut_log(values, readable)
    else:
        check_log(values, readable, 7)


def span_with(name="s", attributes=None, events=(), links=(), start=1, end=2) -> ReadableSpan:
    return ReadableSpan(
        name, CONTEXT, attributes=attributes, events=events, links=links,
        start_time=start, end_time=end, instrumentation_scope=SCOPE,
    )  # fmt: skip


def log_with(body=None, attributes=None, severity_text=None) -> ReadableLogRecord:
    record = LogRecord(body=body, attributes=attributes, severity_text=severity_text)
    return ReadableLogRecord(log_record=record, resource=Resource({}), instrumentation_scope=SCOPE)


@pytest.mark.parametrize("what", ["attributes", "events", "links"])
def test_huge_counts_are_cut_to_fit_and_counted(what):
    count = 30_000  # linear: the quadratic cut this replaced took minutes for 4,000 events
    span = span_with(
        attributes={f"k{i}": i for i in range(count)} if what == "attributes" else None,
        events=[Event(f"e{i}", {"i": i}, i) for i in range(count)] if what == "events" else (),
        links=[Link(CONTEXT, {"i": i}) for i in range(count)] if what == "links" else (),
    )

    payload, truncated = encode_span(span, 1, FTRACE_MAX_PAYLOAD)
    values = unpack_span(payload)

    kept = anyvalue.decode(values[what])
    assert truncated and 0 < len(kept) < count
    assert values[f"dropped_{what}"] == count - len(kept)
    if what == "attributes":  # all the same size: the first ones are kept, in order
        assert kept == {f"k{i}": i for i in range(len(kept))}
    else:
        assert [item["attributes"]["i"] for item in kept] == list(range(len(kept)))
    assert len(payload) > FTRACE_MAX_PAYLOAD - 200, "cut no more than needed"


def test_huge_log_attribute_count_is_cut_to_fit_and_counted():
    readable = log_with(body="b", attributes={f"k{i}": "v" for i in range(30_000)})

    payload, truncated = encode_log(readable, 1, FTRACE_MAX_PAYLOAD)
    values = unpack_log(payload)

    kept = anyvalue.decode(values["attributes"])
    assert truncated and values["dropped_attributes"] == 30_000 - len(kept) > 0
    assert anyvalue.decode(values["body"]) == "b"


@pytest.mark.parametrize(
    "value",
    [
        "x" * 10_000_000,
        "\x00\ud800" * 200_000,
        b"\xff" * 10_000_000,
        2**1_000_000,
        [1.5] * 200_000,
    ],
    ids=["10M str", "NUL and surrogates", "10M bytes", "2**1000000", "long list"],
)
def test_huge_attribute_value_is_left_out_and_counted(value):
    span = span_with(attributes={"small": 1, "huge": value})
    readable = log_with(body="b", attributes={"small": 1, "huge": value})

    span_values = unpack_span(encode_span(span, 1, FTRACE_MAX_PAYLOAD)[0])
    log_values = unpack_log(encode_log(readable, 1, FTRACE_MAX_PAYLOAD)[0])

    for values in (span_values, log_values):
        assert anyvalue.decode(values["attributes"]) == {"small": 1}
        assert values["dropped_attributes"] == 1
        assert values["truncated"] & flags.TRUNCATED_ATTRIBUTES


@pytest.mark.parametrize("name", ["n" * 10_000_000, "\x00" * 1_000_000, "{" * 100_000])
def test_huge_names_become_marked_prefixes_and_push_out_nothing_else(name):
    span = span_with(name=name, attributes={"a": 1}, events=[Event("e", {}, 1)])
    readable = log_with(body="b", attributes={"a": 1}, severity_text=name)
    huge_body = log_with(body=name)

    span_values = unpack_span(encode_span(span, 1, 1024)[0])
    log_values = unpack_log(encode_log(readable, 1, 1024)[0])
    body_values = unpack_log(encode_log(huge_body, 1, 1024)[0])

    assert decode_plain(span_values["name"]).endswith(MARK)
    assert decode_plain(log_values["severity_text"]).endswith(MARK)
    assert anyvalue.decode(log_values["body"]) == "b"
    assert anyvalue.decode(body_values["body"]).endswith(MARK)
    for values in (span_values, log_values):
        assert values["truncated"] == flags.TRUNCATED_TEXT
        assert anyvalue.decode(values["attributes"]) == {"a": 1}
    assert len(anyvalue.decode(span_values["events"])) == 1


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"d": value}
    return value


def test_deep_nesting_up_to_the_limit_is_kept_and_deeper_is_counted():
    deepest = nested(anyvalue.MAX_DEPTH - 1)  # the attributes mapping is one level too
    too_deep = nested(anyvalue.MAX_DEPTH)
    cyclic: dict = {}
    cyclic["self"] = cyclic
    span = span_with(attributes={"ok": deepest, "deep": too_deep, "cycle": cyclic})

    values = unpack_span(encode_span(span, 1, 8184)[0])

    assert anyvalue.decode(values["attributes"]) == {"ok": deepest}
    assert values["dropped_attributes"] == 2


def test_deep_log_body_is_dropped_with_a_clear_reason(monkeypatch, tmp_path, caplog):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsLogExporter(tracefs=fake.tracefs, prefix="deep")
    ok = log_with(body=nested(anyvalue.MAX_DEPTH))

    exporter.export([log_with(body=nested(1000)), ok, log_with(body={1, 2}), ok])
    fake.settle(exporter)

    stats = exporter.stats.snapshot()
    assert stats["dropped_invalid"] == 2 and stats["written"] == 2 + 1, "and the resource"
    assert [anyvalue.decode(r["body"]) for r in fake.decoded(LOG, "deep_log_info")] == [
        nested(anyvalue.MAX_DEPTH)
    ] * 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "one warning per kind of error, not one per record"
    assert "MAX_DEPTH" in warnings[0].getMessage() and "dropped_invalid" in warnings[0].getMessage()


SPECIAL_VALUES = {
    "bytes": b"\x00\xff\xfe",
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "-0.0": -0.0,
    "u64+1": 2**64,
    "s64-1": -(2**63) - 1,
    "2**4096": 2**4096,
    "nul": "a\x00b",
    "lone surrogates": "\ud800 \udfff",
    "invalid UTF-8 (surrogateescape)": b"\xff\xc0\x80".decode("utf-8", "surrogateescape"),
    "pair of surrogates": "\ud83d\ude00",
}


def test_special_values_round_trip_everywhere_a_value_goes():
    span = span_with(
        name="\x00".join(s for s in SPECIAL_VALUES if isinstance(s, str)),
        attributes=SPECIAL_VALUES,
        events=[Event("\ud800", SPECIAL_VALUES, 5)],
        links=[Link(CONTEXT, SPECIAL_VALUES)],
    )
    readable = log_with(body=SPECIAL_VALUES, attributes=SPECIAL_VALUES, severity_text="\x00\udc80")

    check_span(unpack_span(encode_span(span, 1, 8184)[0]), span, 1)
    check_log(unpack_log(encode_log(readable, 1, 8184)[0]), readable, 1)


def test_empty_names_and_names_of_every_unicode_category():
    categories = one_of_each_category()
    assert len(categories) == 30
    names = ["", *categories.values(), "".join(categories.values())]

    for name in names:
        span = span_with(name=name, attributes={name: name}, events=[Event(name, {}, 1)])
        readable = log_with(body=name, attributes={name: name}, severity_text=name)
        check_span(unpack_span(encode_span(span, 1, 8184)[0]), span, 1)
        check_log(unpack_log(encode_log(readable, 1, 8184)[0]), readable, 1)


BAD_SPANS = [
    span_with(name=b"bytes name"),
    span_with(name=None),
    span_with(name=42),
    span_with(start=-1),
    span_with(end=2**64),
    ReadableSpan("no context"),
    span_with(events=[object()]),
]


def test_bad_spans_are_counted_drops_and_the_rest_are_written(monkeypatch, tmp_path, caplog):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="bad")
    good = span_with(name="good", attributes={"weird": {1, 2}, "ok": 1})
    batch = [good, *BAD_SPANS, good]

    result = exporter.export(batch)
    fake.settle(exporter)

    stats = exporter.stats.snapshot()
    records = fake.decoded(SPAN, "bad_span")
    assert result.name == "SUCCESS"
    assert stats["written"] - 1 == len(records), "one resource record besides the spans"
    assert stats["written"] - 1 + stats["dropped_invalid"] == len(batch)
    assert [decode_plain(r["name"]) for r in records].count("good") == 2
    assert anyvalue.decode(records[0]["attributes"]) == {"ok": 1}
    assert records[0]["dropped_attributes"] == 1, "the unencodable attribute is counted"
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "dropped_invalid" in messages


@settings(max_examples=60, deadline=None)
@given(batch=st.lists(spans(), max_size=4), logs=st.lists(log_records(), max_size=4))
def test_exporters_write_any_batch_exactly(batch, logs):
    with pytest.MonkeyPatch.context() as monkeypatch, TemporaryDirectory() as tmp:
        fake = FakeKernel(monkeypatch, Path(tmp))
        span_exporter = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="any")
        log_exporter = UserEventsLogExporter(tracefs=fake.tracefs, prefix="any")
        assert span_exporter.export(batch).name == "SUCCESS"
        assert log_exporter.export(logs).name == "SUCCESS"
        fake.settle(span_exporter, log_exporter)

    span_records = fake.decoded(SPAN, "any_span")
    log_records_ = [
        r for cls in tracepoints.SEVERITY_CLASSES for r in fake.decoded(LOG, f"any_log_{cls}")
    ]
    assert len(span_records) == len(batch) == span_exporter.stats.written - (1 if batch else 0)
    assert len(log_records_) == len(logs) == log_exporter.stats.written - (1 if logs else 0)
    for values, span in zip(span_records, batch, strict=True):
        if not values["truncated"]:
            check_span(values, span, values["resource_id"])
