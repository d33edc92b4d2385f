# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader tracepoints and records as the kernel holds them, for host tests of the
reader's second record format: a ``format`` file as Linux prints one for a tracepoint
registered with ``EVENTHEADER_COMMAND_TYPES``, and whole records (common fields, then the
event built by the tests' own EventHeader encoder) in the Rust span, .NET log and plain
event layouts of docs/common-schema.md."""

from __future__ import annotations

from typing import Any

from tests.reader.decode.eventheader_encoder import E, F, Spec, event, metadata, payload
from tests.support.captures import COMMON
from tests.support.pages import record

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"
PARENT = "1f2e3d4c5b6a7988"
END = "2025-07-11T10:00:01.123456789Z"
END_NS = 1752228001_123456789
START = "2025-07-11T10:00:00.5Z"
START_NS = 1752228000_500000000
LOG_TIME = "2025-07-24T08:09:10.25Z"
LOG_TIME_NS = 1753344550_250000000

_HEADER_FIELDS = (
    ("u8", "eventheader_flags", 8, 1),
    ("u8", "version", 9, 1),
    ("u16", "id", 10, 2),
    ("u16", "tag", 12, 2),
    ("u8", "opcode", 14, 1),
    ("u8", "level", 15, 1),
)


def eventheader_format(name: str, event_id: int) -> str:
    """``events/user_events/<name>/format`` of an EventHeader tracepoint."""
    lines = [f"name: {name}", f"ID: {event_id}", "format:", COMMON]
    for kind, field, offset, size in _HEADER_FIELDS:
        lines.append(f"\tfield:{kind} {field};\toffset:{offset};\tsize:{size};\tsigned:0;")
    lines += ["", 'print fmt: "eventheader_flags=%u", REC->eventheader_flags', ""]
    return "\n".join(lines)


def s8(name: str, value: str) -> Spec:
    return Spec(name, E.STRING_LENGTH16_CHAR8, value=value)


def s16(name: str, value: str) -> Spec:
    return Spec(name, E.STRING_LENGTH16_CHAR16, value=value)


def num(name: str, encoding: E, value: Any, fmt: int = 0) -> Spec:
    return Spec(name, encoding, fmt, value=value)


def struct(name: str, *members: Spec) -> Spec:
    return Spec(name, E.STRUCT, value=[m.value for m in members], children=list(members))


def eventheader_record(
    event_id: int, name: str, specs: list[Spec], level: int = 4, pid: int = 4242
) -> bytes:
    """A whole trace record of an EventHeader tracepoint of ``event_id``."""
    data = event(metadata(name, specs, False), payload(specs, False), False, level=level)
    return record(event_id, data, pid)


def rust_span(name: str = "GET /users", role: str = "cart") -> list[Spec]:
    """opentelemetry-user-events-trace's layout: a client span with a parent."""
    return [
        num("__csver__", E.VALUE32, 1024, F.UNSIGNED_INT),
        struct(
            "PartA",
            s8("time", END),
            s8("ext_dt_traceId", TRACE),
            s8("ext_dt_spanId", SPAN),
            s8("ext_cloud_role", role),
            s8("ext_cloud_roleInstance", "pod-7"),
        ),
        struct(
            "PartB",
            s8("_typeName", "Span"),
            s8("name", name),
            s8("startTime", START),
            num("success", E.VALUE8, True, F.BOOLEAN),
            num("kind", E.VALUE32, 2, F.UNSIGNED_INT),
            s8("parentId", PARENT),
            s8("httpMethod", "GET"),
        ),
        struct("PartC", s8("user", "ann")),
    ]


def dotnet_log() -> list[Spec]:
    """The .NET Geneva exporter's layout: UTF-16 strings, ``__csver__`` a u16 in hex."""
    return [
        num("__csver__", E.VALUE16, 1024, F.HEX_INT),
        struct("PartA", s16("time", LOG_TIME), s16("ext_cloud_role", "orders")),
        struct(
            "PartB",
            s16("_typeName", "Log"),
            s16("body", "order 7 shipped"),
            num("severityNumber", E.VALUE8, 9, F.UNSIGNED_INT),
            s16("severityText", "Information"),
            s16("name", "Orders.Shipping"),
        ),
        struct("PartC", num("orderId", E.VALUE32, 7, F.SIGNED_INT)),
    ]


def plain_event() -> list[Spec]:
    """An EventHeader event of no Common Schema (one any EventHeader writer may write)."""
    return [
        num("count", E.VALUE32, 5, F.UNSIGNED_INT),
        struct("where", num("x", E.VALUE32, -1, F.SIGNED_INT), s8("y", "z")),
    ]
