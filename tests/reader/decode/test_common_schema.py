# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Common Schema 4.0 events in each writer's layout, as read from its source (see
docs/common-schema.md for the repository, path and commit), encoded by the test's own
EventHeader encoder, decoded by the reader's decoder and mapped: each compared with the
checked record expected field by field. Then every time shape, and hostile events: a
reason of the fixed vocabulary, never an exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.reader.decode import common_schema_fields as cs
from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedLink,
    CheckedLog,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.decode.common_schema import (
    CommonSchemaRecord,
    map_event,
)
from opentelemetry_exporter_userevents.reader.decode.common_schema_span import MAX_LINKS
from opentelemetry_exporter_userevents.reader.decode.common_schema_time import parse_time
from opentelemetry_exporter_userevents.reader.decode.eventheader import (
    decode_event,
    parse_tracepoint_name,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import EventHeaderEvent
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord
from tests.reader.decode.eventheader_encoder import E, F, Spec, event, metadata, payload

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"
PARENT = "00f067aa0ba902b7"
T_END = "2025-07-11T10:00:01.123456789Z"
T_END_NS = 1752228001_123456789
T_START = "2025-07-11T10:00:00.5Z"
T_START_NS = 1752228000_500000000


def s8(name: str, value: str) -> Spec:
    """Rust's ``add_str`` and C++'s ``AddString<char>``: a counted UTF-8 string."""
    return Spec(name, E.STRING_LENGTH16_CHAR8, value=value)


def s16(name: str, value: str | bytes) -> Spec:
    """.NET's ``AddString16``: a counted UTF-16 string."""
    return Spec(name, E.STRING_LENGTH16_CHAR16, value=value)


def num(name: str, encoding: E, value: Any, fmt: int = 0, array: str = "") -> Spec:
    return Spec(name, encoding, fmt, value=value, array=array)


def struct(name: str, *members: Spec) -> Spec:
    return Spec(name, E.STRUCT, value=[m.value for m in members], children=list(members))


def decoded(name: str, specs: list[Spec], tracepoint: str = "Prov_L4K1") -> EventHeaderEvent:
    level = parse_tracepoint_name(tracepoint).level
    data = event(metadata(name, specs, False), payload(specs, False), False, level=level)
    return decode_event(tracepoint, data)


def mapped(name: str, specs: list[Spec], tracepoint: str = "Prov_L4K1") -> CommonSchemaRecord:
    return map_event(decoded(name, specs, tracepoint), 77, 1234, "user_events:" + tracepoint)


def span(**changes: Any) -> CheckedSpan:
    base = CheckedSpan(
        trace_id=int(TRACE, 16),
        span_id=int(SPAN, 16),
        parent_span_id=int(PARENT, 16),
        parent_is_remote=False,
        trace_flags=0,
        trace_state=(),
        name="GET /users",
        kind=2,
        status_code=0,
        status_description="",
        start_time_ns=T_START_NS,
        end_time_ns=T_END_NS,
        attributes={},
        dropped_attributes=0,
        events=[],
        dropped_events=0,
        links=[],
        dropped_links=0,
        scope_text="{}",
        scope=None,
        resource_id=0,
        truncated=0,
        timestamp=77,
        pid=1234,
        tracepoint="user_events:Prov_L4K1",
    )
    return base._replace(**changes)


def log(**changes: Any) -> CheckedLog:
    base = CheckedLog(
        time_ns=0,
        observed_time_ns=0,
        trace_id=0,
        span_id=0,
        trace_flags=0,
        severity_number=0,
        severity_text=None,
        event_name=None,
        body=None,
        attributes={},
        dropped_attributes=0,
        scope_text="{}",
        scope=None,
        resource_id=0,
        truncated=0,
        timestamp=77,
        pid=1234,
        tracepoint="user_events:Prov_L4K1",
    )
    return base._replace(**changes)


# --- opentelemetry-user-events-trace ---------------------------------------------------


def rust_span_part_a(time: str = T_END) -> Spec:
    return struct(
        "PartA",
        s8("time", time),
        s8("ext_dt_traceId", TRACE),
        s8("ext_dt_spanId", SPAN),
        s8("ext_cloud_role", "checkout"),
        s8("ext_cloud_roleInstance", "pod-7"),
    )


def test_a_rust_span_of_today_maps_back_field_by_field() -> None:
    links = [
        {"toTraceId": "ff" * 16, "toSpanId": "01" * 8},
        {"toTraceId": TRACE, "toSpanId": PARENT},
    ]
    specs = [
        num("__csver__", E.VALUE32, 1024, F.UNSIGNED_INT),
        rust_span_part_a(),
        struct(
            "PartB",
            s8("_typeName", "Span"),
            s8("name", "GET /users"),
            s8("startTime", T_START),
            num("success", E.VALUE8, False, F.BOOLEAN),
            num("kind", E.VALUE32, 2, F.UNSIGNED_INT),
            s8("parentId", PARENT),
            s8("links", json.dumps(links, separators=(",", ":"))),
            s8("httpMethod", "GET"),
            num("httpStatusCode", E.VALUE64, 503, F.SIGNED_INT),
            s8("dbStatement", "SELECT 1"),
            s8("statusMessage", "upstream down"),
        ),
        struct(
            "PartC",
            s8("user", "ann"),
            num("retries", E.VALUE64, -3, F.SIGNED_INT),
            num("ratio", E.VALUE64, 0.25, F.FLOAT),
            num("cached", E.VALUE8, True, F.BOOLEAN),
        ),
    ]
    result = mapped("Span", specs)
    assert result.resource == {"service.name": "checkout", "service.instance.id": "pod-7"}
    assert result.dropped == ()
    assert result.record == span(
        status_code=2,
        status_description="upstream down",
        attributes={
            "http.request.method": "GET",
            "http.response.status_code": 503,
            "db.query.text": "SELECT 1",
            "user": "ann",
            "retries": -3,
            "ratio": 0.25,
            "cached": True,
        },
        links=[
            CheckedLink(int("ff" * 16, 16), int("01" * 8, 16), 0, (), False, {}, 0),
            CheckedLink(int(TRACE, 16), int(PARENT, 16), 0, (), False, {}, 0),
        ],
    )


def test_an_older_rust_span_root_with_an_empty_parent_and_offset_times() -> None:
    """Before 3716c35b a root span wrote ``parentId`` "" before ``startTime``; before
    9c8db07c times ended ``+00:00`` and ``db.statement`` was written as ``dbStatement``."""
    specs = [
        num("__csver__", E.VALUE32, 1024, F.UNSIGNED_INT),
        rust_span_part_a("2025-07-11T10:00:01.123456789+00:00"),
        struct(
            "PartB",
            s8("_typeName", "Span"),
            s8("name", "GET /users"),
            s8("parentId", ""),
            s8("startTime", "2025-07-11T10:00:00.500+00:00"),
            num("success", E.VALUE8, True, F.BOOLEAN),
            num("kind", E.VALUE32, 1, F.UNSIGNED_INT),
            s8("dbSystem", "mssql"),
            s8("dbStatement", "SELECT * FROM users"),
        ),
    ]
    result = mapped("Span", specs)
    assert result.record == span(
        parent_span_id=None,
        kind=1,
        attributes={"db.system.name": "mssql", "db.query.text": "SELECT * FROM users"},
    )


@pytest.mark.parametrize("kind", range(5))
def test_the_span_kinds_0_to_4_are_the_sdks(kind: int) -> None:
    specs = [
        num("__csver__", E.VALUE32, 1024),
        rust_span_part_a(),
        struct(
            "PartB",
            s8("_typeName", "Span"),
            s8("name", "n"),
            s8("startTime", T_START),
            num("kind", E.VALUE32, kind),
        ),
    ]
    assert mapped("Span", specs).record.kind == kind  # type: ignore[union-attr]


def test_too_many_links_keep_the_first_and_count_the_rest() -> None:
    links = [{"toTraceId": TRACE, "toSpanId": SPAN}] * (MAX_LINKS + 3)
    specs = [
        num("__csver__", E.VALUE32, 1024),
        rust_span_part_a(),
        struct(
            "PartB",
            s8("_typeName", "Span"),
            s8("name", "n"),
            s8("startTime", T_START),
            s8("links", json.dumps(links)),
        ),
    ]
    record = mapped("Span", specs).record
    assert isinstance(record, CheckedSpan)
    assert (len(record.links), record.dropped_links) == (MAX_LINKS, 3)


# --- opentelemetry-user-events-logs ----------------------------------------------------


def test_a_rust_log_of_today_partc_before_partb() -> None:
    specs = [
        num("__csver__", E.VALUE32, 1024, F.UNSIGNED_INT),
        struct(
            "PartA",
            s8("time", "2025-07-24T08:09:10.250Z"),
            s8("ext_dt_traceId", TRACE),
            s8("ext_dt_spanId", SPAN),
            s8("ext_cloud_role", "billing"),
        ),
        struct("PartC", s8("user", "ann"), num("attempt", E.VALUE64, 2, F.SIGNED_INT)),
        struct(
            "PartB",
            s8("_typeName", "Log"),
            s8("body", "payment failed"),
            num("severityNumber", E.VALUE16, 17, F.SIGNED_INT),
            s8("severityText", "ERROR"),
            num("eventId", E.VALUE64, 42, F.SIGNED_INT),
            s8("name", "payment.failed"),
        ),
    ]
    result = mapped("Log", specs, "Prov_L2K1")
    assert result.resource == {"service.name": "billing"}
    assert result.record == log(
        time_ns=1753344550_250000000,
        trace_id=int(TRACE, 16),
        span_id=int(SPAN, 16),
        severity_number=17,
        severity_text="ERROR",
        event_name="payment.failed",
        body="payment failed",
        attributes={"user": "ann", "attempt": 2, "event_id": 42},
        tracepoint="user_events:Prov_L2K1",
    )


def test_an_older_rust_log_nests_ext_dt_and_ext_cloud() -> None:
    """Before 833a92b7: ``ext_dt`` and ``ext_cloud`` structs in PartA, times ``+00:00``,
    the event and PartB ``name`` both the log's event name, or ``Log`` when it had none."""
    specs = [
        num("__csver__", E.VALUE32, 1024, F.UNSIGNED_INT),
        struct(
            "PartA",
            s8("time", "2025-04-03T00:00:00+00:00"),
            struct("ext_dt", s8("traceId", TRACE), s8("spanId", SPAN)),
            struct("ext_cloud", s8("role", "billing"), s8("roleInstance", "vm-1")),
        ),
        struct("PartC", num("code", E.VALUE64, 7, F.SIGNED_INT)),
        struct(
            "PartB",
            s8("_typeName", "Log"),
            num("body", E.VALUE64, 12, F.SIGNED_INT),
            num("severityNumber", E.VALUE16, 9, F.SIGNED_INT),
            s8("name", "payment.failed"),
        ),
    ]
    result = mapped("payment.failed", specs)
    assert result.resource == {"service.name": "billing", "service.instance.id": "vm-1"}
    expected = log(
        time_ns=1743638400_000000000,
        trace_id=int(TRACE, 16),
        span_id=int(SPAN, 16),
        severity_number=9,
        event_name="payment.failed",
        body=12,
        attributes={"code": 7},
    )
    assert result.record == expected
    specs[-1].children[-1].value = "Log"
    specs[-1].value[-1] = "Log"
    assert mapped("Log", specs).record == expected._replace(event_name=None)


def test_the_oldest_rust_log_named_after_its_scope() -> None:
    """Before 54e526c2: ``__csver__`` 0x401 u16 hex, the event named after the scope,
    PartA only ``time``, ``_typeName`` ``Logs``, the EventHeader level as
    ``severityNumber`` and the severity text with a signed-int format (4 bytes of it
    decode as an integer: dropped, counted)."""
    specs = [
        num("__csver__", E.VALUE16, 0x401, F.HEX_INT),
        struct("PartA", s8("time", "2025-02-01T12:00:00.5+00:00")),
        struct("PartC", s8("user", "ann")),
        struct(
            "PartB",
            s8("_typeName", "Logs"),
            s8("body", "hello"),
            num("severityNumber", E.VALUE8, 4, F.SIGNED_INT),
            Spec("severityText", E.STRING_LENGTH16_CHAR8, F.SIGNED_INT, value=b"INFO"),
        ),
    ]
    result = mapped("my_app", specs)
    assert result.dropped == (cs.DROP_SEVERITY_TEXT,)
    assert result.record == log(
        time_ns=1738411200_500000000,
        severity_number=4,  # the EventHeader level, not recoverable as a severity
        event_name="my_app",
        body="hello",
        attributes={"user": "ann"},
        dropped_attributes=1,
    )


# --- the .NET Geneva exporter's EventHeader logs ---------------------------------------


def test_a_dotnet_log_in_utf16_with_an_array_and_env_properties() -> None:
    specs = [
        num("__csver__", E.VALUE16, 0x400, F.HEX_INT),
        struct(
            "PartA",
            s16("time", "2025-01-02T03:04:05.12345Z"),
            s16("ext_cloud_role", "orders"),
            s16("ext_dt_traceId", TRACE),
            s16("ext_dt_spanId", SPAN),
            s16("ext_ex_type", "System.TimeoutException"),
            s16("ext_ex_msg", "timed out"),
        ),
        struct(
            "PartB",
            s16("_typeName", "Log"),
            s16("severityText", "Warning"),
            num("severityNumber", E.VALUE8, 13),
            num("eventId", E.VALUE32, 5, F.SIGNED_INT),
            s16("body", "Order {Id} is late"),
            s16("name", "Orders.Service"),
        ),
        struct(
            "PartC",
            num("ids", E.VALUE32, [3, 1, 2], F.SIGNED_INT, "v"),
            s16("Id", "ü-42"),
            s8("env_properties", '{"tenant":"t1","n":3,"deep":{"x":true}}'),
        ),
    ]
    result = mapped("Log", specs, "MicrosoftOpenTelemetryLogs_L4K1")
    assert result.resource == {"service.name": "orders"}
    assert result.record == log(
        time_ns=1735787045_123450000,
        trace_id=int(TRACE, 16),
        span_id=int(SPAN, 16),
        severity_number=13,
        severity_text="Warning",
        event_name="Orders.Service",
        body="Order {Id} is late",
        attributes={
            "exception.type": "System.TimeoutException",
            "exception.message": "timed out",
            "event_id": 5,
            "ids": [3, 1, 2],
            "Id": "ü-42",
            "tenant": "t1",
            "n": 3,
            "deep.x": True,
        },
        tracepoint="user_events:MicrosoftOpenTelemetryLogs_L4K1",
    )


def test_env_properties_lists_of_mixed_values_stay_json_text() -> None:
    """The SDK keeps only lists of one type: a mixed one stays as its JSON text."""
    props = '{"mixed":[1,"a"],"same":[1,2],"nested":[[1]],"big":18446744073709551615}'
    specs = [
        num("__csver__", E.VALUE16, 0x400, F.HEX_INT),
        struct("PartC", s8("env_properties", props)),
    ]
    result = mapped("Log", specs)
    assert result.record.attributes == {"mixed": '[1, "a"]', "same": [1, 2], "nested": "[[1]]"}
    assert result.dropped == (cs.DROP_BIG_INTEGER,)


def test_env_properties_that_are_not_a_json_object_stay_text() -> None:
    specs = [
        num("__csver__", E.VALUE16, 0x400, F.HEX_INT),
        struct("PartC", s8("env_properties", "[1, 2")),
    ]
    assert mapped("Log", specs).record.attributes == {"env_properties": "[1, 2"}


# --- opentelemetry-cpp-contrib's user_events logs --------------------------------------


def test_a_cpp_log_without_parta_and_a_u64_otlp_cannot_hold() -> None:
    specs = [
        num("__csver__", E.VALUE16, 0x400, F.UNSIGNED_INT),
        struct(
            "PartB",
            s8("_typeName", "Log"),
            num("severityNumber", E.VALUE16, 21),
            s8("severityText", "FATAL"),
            num("eventId", E.VALUE64, 9, F.SIGNED_INT),
            s8("body", "disk full"),
        ),
        struct(
            "PartC",
            num("free", E.VALUE64, 2**63),
            num("used", E.VALUE64, 2**63 - 1),
            num("ok", E.VALUE8, False, F.BOOLEAN),
        ),
    ]
    result = mapped("Logs", specs, "Prov_L1K1")
    assert result.dropped == (cs.DROP_BIG_INTEGER,)
    assert result.record == log(
        severity_number=21,
        severity_text="FATAL",
        body="disk full",
        attributes={"event_id": 9, "used": 2**63 - 1, "ok": False},
        dropped_attributes=1,
        tracepoint="user_events:Prov_L1K1",
    )


# --- any other EventHeader event -------------------------------------------------------


def test_an_event_without_csver_is_a_log_of_its_fields() -> None:
    specs = [
        s8("msg", "hi"),
        struct("req", s8("path", "/x"), struct("peer", num("port", E.VALUE16, 443))),
        num("vals", E.VALUE8, [1, 2], array="c"),
        struct("item", num("n", E.VALUE8, 1)),
    ]
    result = mapped("MyEvent", specs, "Prov_L3K5")
    assert result.resource == {}
    assert result.record == log(
        event_name="MyEvent",
        severity_number=13,
        attributes={
            "msg": "hi",
            "req.path": "/x",
            "req.peer.port": 443,
            "vals": [1, 2],
            "item.n": 1,
        },
        tracepoint="user_events:Prov_L3K5",
    )


def test_attributes_past_the_bound_are_counted() -> None:
    members = [num(f"f{i}", E.VALUE8, 1) for i in range(100)]  # a struct holds 127
    specs = [struct(f"s{j}", *members) for j in range(11)]
    record = mapped("Many", specs).record
    assert len(record.attributes) == cs.MAX_ATTRIBUTES
    assert record.dropped_attributes == 11 * 100 - cs.MAX_ATTRIBUTES


# --- times ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2025-07-11T10:00:01Z", 1752228001_000000000),  # chrono AutoSi, whole seconds
        ("2025-07-11T10:00:01.120Z", 1752228001_120000000),  # 3 digits
        ("2025-07-11T10:00:01.120400Z", 1752228001_120400000),  # 6
        ("2025-07-11T10:00:01.000000007Z", 1752228001_000000007),  # 9
        ("2025-07-11T10:00:01.120+00:00", 1752228001_120000000),  # older chrono
        ("2025-07-11T10:00:01.1234Z", 1752228001_123400000),  # .NET FFFFFF, trimmed
        ("2025-07-11T10:00:01.123456Z", 1752228001_123456000),  # .NET, microseconds
        ("2025-07-11T12:00:01+02:00", 1752228001_000000000),
        ("2016-12-31T23:59:60Z", 1483228800_000000000),  # chrono's leap second
        ("1970-01-01T00:00:00Z", 0),
    ],
)
def test_every_time_shape(text: str, ns: int) -> None:
    assert parse_time(text) == ns


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2025-07-11",
        "2025-07-11T10:00:01",  # no offset
        "2025-07-11 10:00:01Z",
        "2025-07-11T10:00:01.Z",
        "2025-07-11T10:00:01.1234567890Z",
        "2025-02-30T10:00:00Z",
        "2025-07-11T24:00:00Z",
        "1969-12-31T23:59:59Z",
        "9999-12-31T23:59:59Z",  # past a u64 of nanoseconds
        "2025-07-11T10:00:01+24:00",
        "２０２５-07-11T10:00:01Z",  # digits of another script
        "2025-07-11T10:00:01Z" + " " * 100,
    ],
)
def test_what_is_not_a_time(text: str) -> None:
    assert parse_time(text) is None


# --- hostile events -------------------------------------------------------------------

CSVER = num("__csver__", E.VALUE32, 1024)
GOOD_B = [s8("_typeName", "Span"), s8("name", "n"), s8("startTime", T_START)]


def span_with(part_a: list[Spec] | None = None, part_b: list[Spec] | None = None) -> list[Spec]:
    a = part_a if part_a is not None else [s8("time", T_END), s8("ext_dt_traceId", TRACE)]
    a = a + [s8("ext_dt_spanId", SPAN)] if part_a is None else a
    return [CSVER, struct("PartA", *a), struct("PartB", *(part_b or GOOD_B))]


@pytest.mark.parametrize(
    ("specs", "reason"),
    [
        ([num("__csver__", E.VALUE32, 0x300)], cs.CSVER),
        ([s8("__csver__", "1024")], cs.CSVER),
        ([CSVER, CSVER], cs.CSVER),
        ([CSVER, s8("PartA", "x")], cs.PART_NOT_STRUCT),
        ([CSVER, struct("PartB", s8("a", "")), struct("PartB", s8("a", ""))], cs.PART_REPEATED),
        ([CSVER, struct("PartB", *GOOD_B)], cs.SPAN_NO_PART_A),
        ([CSVER, struct("PartB", s8("x", ""), s8("x", ""))], cs.FIELD_REPEATED),
        (span_with([s8("time", T_END), s8("ext_dt_spanId", SPAN)]), cs.TRACE_ID_MISSING),
        (span_with([s8("time", T_END), s8("ext_dt_traceId", TRACE)]), cs.SPAN_ID_MISSING),
        (
            span_with([s8("ext_dt_traceId", TRACE), s8("ext_dt_spanId", SPAN)]),
            cs.TIME_MISSING,
        ),
        (
            span_with(
                [s8("time", T_END), num("ext_dt_traceId", E.VALUE64, 1), s8("ext_dt_spanId", SPAN)]
            ),
            cs.TRACE_ID,
        ),
        (
            span_with(
                [s8("time", T_END), s8("ext_dt_traceId", "0" * 32), s8("ext_dt_spanId", SPAN)]
            ),
            cs.TRACE_ID_ZERO,
        ),
        (
            span_with(
                [s8("time", T_END), s8("ext_dt_traceId", TRACE), s8("ext_dt_spanId", "0" * 16)]
            ),
            cs.SPAN_ID_ZERO,
        ),
        (
            span_with(
                [s8("time", "yesterday"), s8("ext_dt_traceId", TRACE), s8("ext_dt_spanId", SPAN)]
            ),
            cs.TIME,
        ),
        (span_with(part_b=[s8("_typeName", "Span"), s8("startTime", T_START)]), cs.NAME_MISSING),
        (span_with(part_b=[s8("_typeName", "Span"), s8("name", "n")]), cs.START_TIME_MISSING),
        (span_with(part_b=[*GOOD_B[:2], num("startTime", E.VALUE64, 5)]), cs.START_TIME),
        (
            span_with(part_b=[*GOOD_B, num("name2", E.VALUE8, 1), num("kind", E.VALUE32, 5)]),
            cs.KIND,
        ),
        (span_with(part_b=[*GOOD_B, s8("kind", "client")]), cs.KIND),
        (span_with(part_b=[*GOOD_B, num("success", E.VALUE8, 2, F.BOOLEAN)]), cs.SUCCESS),
        (span_with(part_b=[*GOOD_B, s8("parentId", "xyz")]), cs.PARENT_ID),
        (span_with(part_b=[*GOOD_B, num("statusMessage", E.VALUE8, 1)]), cs.STATUS_MESSAGE),
        (span_with(part_b=[*GOOD_B, s8("links", "[{")]), cs.LINKS),
        (span_with(part_b=[*GOOD_B, s8("links", "{}")]), cs.LINKS),
        (span_with(part_b=[*GOOD_B, s8("links", "[1]")]), cs.LINKS),
        (span_with(part_b=[*GOOD_B, s8("links", '[{"toTraceId":"x"}]')]), cs.LINKS),
        (span_with(part_b=[*GOOD_B, s8("links", "[" * 5000)]), cs.LINKS),
        (span_with(part_b=[*GOOD_B, s8("links", "[" + "9" * 5000 + "]")]), cs.LINKS),
        (
            [CSVER, struct("PartB", num("severityNumber", E.VALUE64, 2**64 - 1))],
            cs.SEVERITY_NUMBER,
        ),
        ([CSVER, struct("PartB", num("severityNumber", E.VALUE8, 25))], cs.SEVERITY_NUMBER),
        ([CSVER, struct("PartB", num("name", E.VALUE8, 1))], cs.NAME),
        ([CSVER, struct("PartA", num("ext_cloud_role", E.VALUE8, 1))], cs.EXTENSION),
        ([CSVER, struct("PartA", s8("time", "2025-07-11T10:00:01.Z"))], cs.TIME),
    ],
)
def test_a_hostile_event_gives_its_reason(specs: list[Spec], reason: str) -> None:
    with pytest.raises(InvalidRecord) as caught:
        mapped("Span", specs)
    assert caught.value.reason == reason
    assert reason in cs.REASONS


def test_a_u64_body_past_2_63_is_dropped_and_counted() -> None:
    specs = [CSVER, struct("PartB", num("body", E.VALUE64, 2**64 - 1), s8("_typeName", "Log"))]
    result = mapped("Log", specs)
    assert (result.record.body, result.record.dropped_attributes) == (None, 1)
    assert result.dropped == (cs.DROP_BIG_INTEGER,)


def test_a_parta_value_the_resource_cannot_hold_is_counted_in_the_record() -> None:
    """PartA's other fields are the resource's; the resource has no count of its own, so
    what it leaves out is counted in the record's ``dropped_attributes``, as listed."""
    part_a = struct(
        "PartA",
        s8("ext_cloud_role", "orders"),
        num("big", E.VALUE64, 2**63),
        s8("service.name", "again"),
        num("ok", E.VALUE64, 2**63 - 1),
    )
    as_log = mapped("Log", [CSVER, part_a, struct("PartB", s8("_typeName", "Log"))])
    assert as_log.resource == {"service.name": "orders", "ok": 2**63 - 1}
    assert as_log.record.dropped_attributes == 2
    assert as_log.dropped == (cs.DROP_BIG_INTEGER, cs.DROP_REPEATED)
    span_a = struct("PartA", *rust_span_part_a().children, num("big", E.VALUE64, 2**64 - 1))
    as_span = mapped("Span", [CSVER, span_a, struct("PartB", *GOOD_B)])
    assert isinstance(as_span.record, CheckedSpan)
    assert (as_span.record.dropped_attributes, as_span.dropped) == (1, (cs.DROP_BIG_INTEGER,))


def test_a_struct_body_is_a_map_and_an_array_of_structs_a_list_of_maps() -> None:
    inner = struct("body", num("n", E.VALUE8, 1), struct("m", s8("k", "v")))
    as_map = mapped("Log", [CSVER, struct("PartB", inner)])
    assert as_map.record.body == {"n": 1, "m.k": "v"}
    big = struct("body", num("a", E.VALUE64, 2**64 - 1), num("b", E.VALUE64, 2**63), s8("c", "x"))
    with_big = mapped("Log", [CSVER, struct("PartB", big)])
    assert with_big.record.body == {"c": "x"}
    assert (with_big.record.dropped_attributes, with_big.dropped) == (2, (cs.DROP_BIG_INTEGER,))
    items = Spec("body", E.STRUCT, array="v", value=[[1], [2]], children=[num("n", E.VALUE8, 0)])
    as_list = mapped("Log", [CSVER, struct("PartB", items)])
    assert as_list.record.body == [{"n": 1}, {"n": 2}]


def test_unpaired_surrogates_become_replacement_characters() -> None:
    specs = [s16("text", b"a\0\0\xd8b\0")]  # UTF-16LE of a, an unpaired U+D800, b
    text = mapped("E", specs).record.attributes["text"]
    assert "\ud800" not in text and text.startswith("a") and text.endswith("b")
    text.encode("utf-8")


NAMES = st.sampled_from(
    [
        "__csver__",
        "PartA",
        "PartB",
        "PartC",
        "time",
        "startTime",
        "ext_dt_traceId",
        "ext_dt_spanId",
        "ext_dt",
        "traceId",
        "ext_cloud_role",
        "_typeName",
        "name",
        "kind",
        "success",
        "parentId",
        "links",
        "body",
        "severityNumber",
        "severityText",
        "eventId",
        "env_properties",
        "x",
    ]
)
TEXTS = st.sampled_from(
    ["", "Span", "Log", T_END, TRACE, SPAN, "0" * 16, "[]", f'[{{"toTraceId":"{TRACE}"}}]', "{}"]
) | st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
SCALARS = st.one_of(
    st.builds(s8, NAMES, TEXTS),
    st.builds(s16, NAMES, TEXTS),
    st.builds(lambda n, v: num(n, E.VALUE64, v), NAMES, st.integers(0, 2**64 - 1)),
    st.builds(
        lambda n, v: num(n, E.VALUE64, v, F.SIGNED_INT), NAMES, st.integers(-(2**63), 2**63 - 1)
    ),
    st.builds(
        lambda n, v: num(n, E.VALUE32, v), NAMES, st.sampled_from([0, 1, 4, 5, 24, 25, 1024])
    ),
    st.builds(lambda n, v: num(n, E.VALUE8, v, F.BOOLEAN), NAMES, st.integers(0, 3)),
    st.builds(lambda n, v: num(n, E.VALUE64, v, F.FLOAT), NAMES, st.floats()),
    st.builds(
        lambda n, v: num(n, E.VALUE16, v, array="v"), NAMES, st.lists(st.integers(0, 9), max_size=3)
    ),
)
FIELDS = st.recursive(
    SCALARS,
    lambda inner: st.builds(
        lambda n, members: struct(n, *members), NAMES, st.lists(inner, min_size=1, max_size=5)
    ),
    max_leaves=20,
)


def _ok_value(value: Any) -> bool:
    if type(value) is list:
        return all(_ok_value(v) for v in value)
    if type(value) is int:
        return -(2**63) <= value < 2**63
    return type(value) in (str, float, bool, bytes) or value is None


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(FIELDS, max_size=8), st.booleans())
@example(  # a PartA value for the resource that OTLP cannot hold (was listed, not counted)
    [
        struct("PartB", num("__csver__", E.VALUE64, 0)),
        struct("PartA", s8("__csver__", ""), num("PartA", E.VALUE64, 2**63)),
    ],
    True,
)
def test_random_field_sets_map_or_give_a_reason(fields: list[Spec], with_csver: bool) -> None:
    specs = [CSVER, *fields] if with_csver else fields
    try:
        result = mapped("Ev", specs)
    except InvalidRecord as error:
        assert error.reason in cs.REASONS
        return
    record = result.record
    assert isinstance(record, (CheckedSpan, CheckedLog))
    assert set(result.dropped) <= cs.DROP_REASONS
    assert bool(result.dropped) == (record.dropped_attributes > 0)
    assert len(record.attributes) <= cs.MAX_ATTRIBUTES
    assert all(_ok_value(v) for v in record.attributes.values())
    assert all(_ok_value(v) for v in result.resource.values())


def _layouts() -> list[list[Spec]]:
    """A Rust span and a .NET log whose every field a test may replace."""
    rust_span = [
        num("__csver__", E.VALUE32, 1024, F.UNSIGNED_INT),
        rust_span_part_a(),
        struct(
            "PartB",
            *GOOD_B,
            num("success", E.VALUE8, False, F.BOOLEAN),
            num("kind", E.VALUE32, 2),
            s8("parentId", PARENT),
            s8("links", f'[{{"toTraceId":"{TRACE}","toSpanId":"{SPAN}"}}]'),
            s8("statusMessage", "down"),
        ),
        struct("PartC", s8("user", "ann")),
    ]
    dotnet_log = [
        num("__csver__", E.VALUE16, 0x400, F.HEX_INT),
        struct("PartA", s16("time", "2025-01-02T03:04:05Z"), s16("ext_dt_traceId", TRACE)),
        struct(
            "PartB",
            s16("_typeName", "Log"),
            s16("severityText", "Warning"),
            num("severityNumber", E.VALUE8, 13),
            s16("name", "Orders"),
        ),
        struct("PartC", s8("env_properties", '{"a":1}')),
    ]
    return [rust_span, dotnet_log]


def _leaves(specs: list[Spec]) -> list[tuple[list[Spec], int]]:
    """(siblings, index) of every field, structs' members included."""
    found = []
    for index, spec in enumerate(specs):
        found.append((specs, index))
        if spec.encoding == E.STRUCT and not spec.array:
            found += _leaves(spec.children)
    return found


def _sync(specs: list[Spec]) -> None:
    """Structs' values from their members' (after a member was replaced)."""
    for spec in specs:
        if spec.encoding == E.STRUCT and not spec.array:
            _sync(spec.children)
            spec.value = [child.value for child in spec.children]


def test_the_layouts_the_next_test_damages_map_as_they_are() -> None:
    span_layout, log_layout = _layouts()
    assert isinstance(mapped("Span", span_layout).record, CheckedSpan)
    result = mapped("Log", log_layout)
    assert (result.record.event_name, result.record.attributes) == ("Orders", {"a": 1})


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 1), st.integers(0, 100), FIELDS)
def test_any_one_field_of_a_real_layout_replaced_maps_or_gives_a_reason(
    layout: int, which: int, replacement: Spec
) -> None:
    specs = _layouts()[layout]
    leaves = _leaves(specs)
    siblings, index = leaves[which % len(leaves)]
    replacement.name = siblings[index].name  # the same name, any type or shape
    siblings[index] = replacement
    _sync(specs)
    try:
        result = mapped("Ev", specs)
    except InvalidRecord as error:
        assert error.reason in cs.REASONS
        return
    assert set(result.dropped) <= cs.DROP_REASONS
    assert all(_ok_value(v) for v in result.record.attributes.values())


def test_the_document_lists_every_reason() -> None:
    doc = Path(__file__).resolve().parents[3] / "docs" / "common-schema.md"
    section = doc.read_text(encoding="utf-8").split("## Reasons")[1].split("\n## ")[0]
    listed = {line[3:-1] for line in section.splitlines() if line.startswith("- `")}
    assert listed == cs.REASONS | cs.DROP_REASONS
