# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Bad and arbitrary input through the real kernel: every record the exporters write is
accepted (no EFAULT from the NUL checks), kept, and decodes back to what was exported."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsSpanExporter,
)
from opentelemetry_exporter_userevents._export.log_encoder import severity_number
from opentelemetry_exporter_userevents.abi.ring_buffer import PERF_MAX_PAYLOAD
from opentelemetry_exporter_userevents.record import anyvalue, flags
from opentelemetry_exporter_userevents.record.schema import LOG, SPAN
from tests.support.kernel_support import PerfTracepoint
from tests.support.otel_strategies import log_records, one_of_each_category, spans
from tests.support.records import (
    check_cut_log,
    check_cut_span,
    check_log,
    check_span,
    fields_the_kernel_accepts,
)

pytestmark = pytest.mark.kernel

# A sample, not the full search (that runs on the host, without a kernel): the guest is slow.
KERNEL_SAMPLE = settings(
    max_examples=25,
    deadline=None,
    database=None,  # the guest's file system is read-only
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def through_the_kernel(tracefs, registration, record_schema, export):
    """Run ``export`` with perf attached to ``registration``; the decoded records it wrote."""
    perf = PerfTracepoint(tracefs.event_id(registration.system, registration.tracepoint))
    try:
        export()
        samples = perf.samples()
    finally:
        perf.close()
    fmt = tracefs.read_format(registration.system, registration.tracepoint)
    for raw in samples:  # after the 8-byte trace_entry; perf's padding does not matter
        fields_the_kernel_accepts(raw[fmt.fields[0].offset :], record_schema)
    return [record_schema.unpack(raw, fmt) for raw in samples]


@pytest.fixture
def span_exporter(prefix):
    exporter = UserEventsSpanExporter(prefix=prefix, max_record_size=PERF_MAX_PAYLOAD)
    yield exporter
    exporter.shutdown()


@pytest.fixture
def log_exporter(prefix):
    exporter = UserEventsLogExporter(prefix=prefix, max_record_size=PERF_MAX_PAYLOAD)
    yield exporter
    exporter.shutdown()


@KERNEL_SAMPLE
@given(span=spans())
def test_a_sample_of_arbitrary_spans_round_trips_through_the_kernel(span_exporter, tracefs, span):
    before = span_exporter.stats.snapshot()

    (values,) = through_the_kernel(
        tracefs, span_exporter.registration, SPAN, lambda: span_exporter.export([span])
    )

    after = span_exporter.stats.snapshot()
    assert after["written"] == before["written"] + 1
    assert after["dropped_write_error"] == 0, "the kernel accepted every record"
    if values["truncated"]:
        check_cut_span(values, span)
    else:
        check_span(values, span, values["resource_id"])


@KERNEL_SAMPLE
@given(readable=log_records())
def test_a_sample_of_arbitrary_logs_round_trips_through_the_kernel(log_exporter, tracefs, readable):
    registration = log_exporter.registration_for(severity_number(readable))
    before = log_exporter.stats.snapshot()

    (values,) = through_the_kernel(
        tracefs, registration, LOG, lambda: log_exporter.export([readable])
    )

    assert log_exporter.stats.snapshot()["written"] == before["written"] + 1
    if values["truncated"]:
        check_cut_log(values, readable)
    else:
        check_log(values, readable, values["resource_id"])


CONTEXT = SpanContext(0xABC, 0xDEF, is_remote=False)
SCOPE = InstrumentationScope("scope", "1.0")


def test_names_of_every_unicode_category_and_empty_names(span_exporter, tracefs):
    names = ["", *one_of_each_category().values()]
    spans_ = [
        ReadableSpan(name, CONTEXT, attributes={name: name}, events=[Event(name, {}, 1)],
                     start_time=1, end_time=2, instrumentation_scope=SCOPE)
        for name in names
    ]  # fmt: skip

    records = through_the_kernel(
        tracefs, span_exporter.registration, SPAN, lambda: span_exporter.export(spans_)
    )

    assert len(records) == len(names) == 31
    for values, span in zip(records, spans_, strict=True):
        check_span(values, span, values["resource_id"])


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"d": value}
    return value


def test_huge_deep_and_special_values_arrive_cut_or_counted(prefix, tracefs, attach):
    exporter = UserEventsSpanExporter(prefix=prefix)  # the default size, kept by ftrace
    attach(exporter.registration)
    span = ReadableSpan(
        "\x00" * 100_000,
        CONTEXT,
        attributes={"huge": "x" * 1_000_000, "deep": nested(anyvalue.MAX_DEPTH), "inf": 1e999,
                    "bytes": b"\xff\x00", "big": 2**64, "bad utf-8": b"\xff".decode("utf-8",
                    "surrogateescape"), "kept": 1},
        events=[Event(f"e{i}", {"i": i}, i) for i in range(2_000)],
        links=[Link(CONTEXT, {"i": i}) for i in range(2_000)],
        start_time=1,
        end_time=2,
        instrumentation_scope=SCOPE,
    )  # fmt: skip

    (values,) = through_the_kernel(
        tracefs, exporter.registration, SPAN, lambda: exporter.export([span])
    )
    lines = attach.lines(exporter.registration)
    exporter.shutdown()

    assert len(lines) == 1, "ftrace kept it: it fits the default record size"
    assert anyvalue.decode(values["attributes"]) == {
        "inf": 1e999, "bytes": b"\xff\x00", "big": 2**64, "bad utf-8": "\udcff", "kept": 1
    }  # fmt: skip
    assert values["dropped_attributes"] == 2, "the huge one (cut) and the deep one (refused)"
    assert values["dropped_events"] + len(anyvalue.decode(values["events"])) == 2_000
    assert values["dropped_links"] == 2_000
    assert values["truncated"] & flags.TRUNCATED_TEXT
    assert exporter.stats.snapshot()["truncated"] == 1
