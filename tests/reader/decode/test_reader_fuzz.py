# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Fuzzing the reader's parsers: pages, records, format files and record texts. The only
failure allowed is a clear error (PageError/ValueError), or a counted skip."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import (
    FTRACE_MAX_PAYLOAD,
    PageError,
    PageLayout,
    parse_page,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder, TraceRecord
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.record import schema
from tests.support.pages import data_event, page, record
from tests.support.records import format_of
from tests.support.span_fixtures import make_spans

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
SPAN_FORMAT = format_of(schema.SPAN, "otel_span.1", event_id=300)
GOOD = record(300, encode_span(make_spans()[1], 5, FTRACE_MAX_PAYLOAD)[0])


@SETTINGS
@given(st.binary(max_size=4200))
def test_arbitrary_bytes_decode_as_a_page_or_raise_page_error(raw):
    try:
        decoded = parse_page(raw, PageLayout())
    except PageError:
        return
    for _, payload in decoded.events:
        assert len(payload) <= len(raw)


@SETTINGS
@given(st.lists(st.integers(0, 2**32 - 1), max_size=64), st.integers(0, 2**64 - 1))
def test_arbitrary_event_headers_decode_or_raise_page_error(words, timestamp):
    data = struct.pack(f"<{len(words)}I", *words)
    try:
        parse_page(page(timestamp, [data]), PageLayout())
    except PageError:
        pass


@SETTINGS
@given(st.integers(0, len(GOOD) - 1), st.binary(min_size=1, max_size=8), st.integers(0, 300))
def test_corrupted_records_are_counted_never_raised(position, garbage, cut):
    broken = bytearray(GOOD)
    broken[position : position + len(garbage)] = garbage
    decoder = RecordDecoder("otel")
    decoder.add(SPAN_FORMAT)
    records = decoder.decode_pages([page(1, [data_event(1, bytes(broken)[: len(GOOD) - cut])])])

    assert decoder.stats.records + decoder.stats.undecodable == 1
    join_stage = JoinStage()
    for item in records:  # whatever decodes, the join_stage rebuilds or counts as invalid
        values = dict(item.values, resource_id=0)
        join_stage.add([TraceRecord(0, "span", item.tracepoint, 1, values)])
    join_stage.flush()
    assert join_stage.stats.spans + join_stage.stats.invalid == len(records)


@SETTINGS
@given(st.text(max_size=600))
def test_arbitrary_format_text_parses_or_raises_value_error(text):
    try:
        fmt = parse_format(text)
    except ValueError:
        return
    try:
        schema.SPAN.unpacker(fmt)
    except ValueError:
        pass


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from([f.name for f in schema.SPAN.fields] + ["x"]),
            st.integers(0, 5000),
            st.sampled_from([1, 2, 4, 8, 16, 32, 3]),
            st.booleans(),
        ),
        max_size=30,
    ),
    st.binary(max_size=600),
)
def test_arbitrary_format_layouts_decode_or_raise_value_error(fields, raw):
    lines = [f"\tfield:u64 {n};\toffset:{o};\tsize:{s};\tsigned:{int(g)};" for n, o, s, g in fields]
    text = "name: otel_span.1\nID: 300\nformat:\n\tfield:unsigned short common_type;\toffset:0;" \
        "\tsize:2;\tsigned:0;\n\n" + "\n".join(lines) + '\n\nprint fmt: ""\n'  # fmt: skip
    fmt = parse_format(text)
    try:
        decode = schema.SPAN.unpacker(fmt).unpack
    except ValueError:
        return
    try:
        decode(raw)
    except ValueError:
        pass


@SETTINGS
@given(st.text(max_size=200))
def test_arbitrary_header_page_text_gives_a_layout_or_value_error(text):
    try:
        layout = PageLayout.from_header_page(text)
    except ValueError:
        return
    assert layout.data_offset < layout.page_size


@SETTINGS
@given(st.text(max_size=300), st.text(max_size=50))
def test_arbitrary_resource_texts_are_learnt_or_counted(attributes, schema_url):
    values = {
        "resource_id": 1,
        "interval_ms": 0,
        "attributes": attributes,
        "schema_url": schema_url,
    }
    join_stage = JoinStage()

    join_stage.add([TraceRecord(0, "resource", "otel_resource.0", 1, values)])

    assert join_stage.stats.resources + join_stage.stats.invalid == 1
