# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Ring-buffer pages and record decoding on the host, from pages built like the kernel's."""

from __future__ import annotations

import pytest

from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.ring_buffer import (
    FTRACE_MAX_PAYLOAD,
    PageError,
    PageLayout,
    parse_page,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.record import schema
from opentelemetry_exporter_userevents.record.tracepoints import base_name
from tests.support.pages import (
    HEADER_PAGE,
    absolute,
    data_event,
    padding,
    page,
    record,
    time_extend,
)
from tests.support.records import format_of
from tests.support.span_fixtures import make_spans

LAYOUT = PageLayout()


def test_header_page_gives_the_layout():
    layout = PageLayout.from_header_page(HEADER_PAGE)
    assert layout == PageLayout(0, 8, 16, 4096)
    assert PageLayout.from_header_page(HEADER_PAGE, 8192).page_size == 8192
    with pytest.raises(ValueError):
        PageLayout.from_header_page("field: u64 timestamp; offset:0; size:8;")


def test_short_and_long_events_with_their_timestamps():
    long = bytes(range(200))
    raw = page(1000, [data_event(5, b"abc"), data_event(7, long), data_event(0, b"x" * 112)])

    decoded = parse_page(raw, LAYOUT)

    assert [(ts, bytes(p)) for ts, p in decoded.events] == [
        (1005, b"abc\0"),
        (1012, long),
        (1012, b"x" * 112),
    ]
    assert not decoded.missed and decoded.missed_count is None


def test_time_extend_and_absolute_timestamps():
    big = (3 << 27) + 11
    raw = page(
        1 << 40,
        [time_extend(big), data_event(0, b"a"), absolute((1 << 40) + 5), data_event(2, b"b")],
    )

    events = parse_page(raw, LAYOUT).events

    assert [ts for ts, _ in events] == [(1 << 40) + big, (1 << 40) + 7]


def test_discarded_event_is_skipped_without_its_delta():
    raw = page(100, [data_event(1, b"a"), padding(24), data_event(1, b"b")])

    events = parse_page(raw, LAYOUT).events

    assert [(ts, bytes(p)) for ts, p in events] == [(101, b"a\0\0\0"), (102, b"b\0\0\0")]


def test_null_padding_ends_the_page():
    raw = page(100, [data_event(1, b"a"), b"\x1d\0\0\0\0\0\0\0", data_event(1, b"b")])

    assert len(parse_page(raw, LAYOUT).events) == 1


def test_missed_events_flag_and_stored_count():
    assert parse_page(page(1, [], missed_flag=True), LAYOUT).missed
    counted = parse_page(page(1, [data_event(0, b"a")], missed=17), LAYOUT)
    assert counted.missed and counted.missed_count == 17


def test_zero_filled_page_has_no_events():
    assert parse_page(bytes(4096), LAYOUT).events == []


@pytest.mark.parametrize(
    "raw",
    [
        b"\0" * 10,  # shorter than the header
        page(1, [data_event(0, b"a" * 8)])[:20],  # commit runs past the page
        page(1, [b"\0\0\0\0\xff\xff\0\0"]),  # type_len 0 with a huge length
        page(1, [data_event(0, b"abcd")[:6]]),  # event header cut by the commit size
        page(1, [b"\x1d\x01\0\0\xf0\xff\0\0"]),  # padding longer than the data
    ],
)
def test_corrupt_pages_raise_page_error(raw):
    with pytest.raises(PageError):
        parse_page(raw, LAYOUT)


def _decoder() -> RecordDecoder:
    decoder = RecordDecoder("otel")
    assert decoder.add(format_of(schema.SPAN, "otel_span.1f", event_id=300)) == "span"
    return decoder


def test_decoder_decodes_span_records_and_counts_what_it_cannot():
    span = make_spans()[0]
    payload, _ = encode_span(span, 42, FTRACE_MAX_PAYLOAD)
    good = record(300, payload, pid=1234)
    raw = page(
        50,
        [
            data_event(1, good),
            data_event(1, record(301, payload)),  # unknown event id
            data_event(1, good[:60]),  # too short for its format
            data_event(1, b"\1\0"),  # shorter than the common header
        ],
    )
    decoder = _decoder()

    records = decoder.decode_pages([raw, b"\xff" * 40])

    assert len(records) == 1
    (only,) = records
    assert (only.kind, only.tracepoint, only.pid, only.timestamp) == (
        "span",
        "otel_span.1f",
        1234,
        51,
    )
    assert only.values["span_id"] == f"{span.context.span_id:016x}"
    assert only.values["resource_id"] == 42
    stats = decoder.stats
    assert (stats.records, stats.undecodable, stats.pages, stats.corrupt_pages) == (1, 3, 2, 1)


def test_decoder_refuses_names_and_formats_that_are_not_ours():
    decoder = RecordDecoder("otel")
    with pytest.raises(ValueError, match="not one of our"):
        decoder.add(format_of(schema.SPAN, "other_span.1"))
    with pytest.raises(ValueError, match="has no field"):
        decoder.add(format_of(schema.RESOURCE, "otel_span.2"))
    assert decoder.kind_of("otel_log_warn.a0")[0] == "log"
    assert decoder.kind_of("otel_resource")[0] == "resource"
    assert decoder.kind_of("otel_log_verbose.1") is None
    assert base_name("otel_span.ff") == "otel_span" and base_name("a.b.zz") == "a.b.zz"
