# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What spans and logs share in Common Schema 4.0 as Rust's user_events exporters write it
(docs/common-schema.md): ``__csver__``, PartA's time, trace context and cloud role, and
the level a severity maps to."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opentelemetry_exporter_userevents._export import eventheader_encoder as eh
from opentelemetry_exporter_userevents._export.eventheader_encoder import Field

CS_VERSION = eh.u32(b"__csver__\0", 1024)
"""Common Schema 4.0 (0x400), a u32 as Rust writes it."""
PART_A = b"PartA\0"
PART_B = b"PartB\0"
PART_C = b"PartC\0"
TIME = b"time\0"
TRACE_ID = b"ext_dt_traceId\0"
SPAN_ID = b"ext_dt_spanId\0"
_ROLE = b"ext_cloud_role\0"
_ROLE_INSTANCE = b"ext_cloud_roleInstance\0"
_NANOS = 1_000_000_000
SPAN_LEVEL = 4
"""Rust's trace exporter writes spans at Informational."""


def rfc3339(time_ns: int) -> bytes:
    """``time_ns`` as chrono's ``to_rfc3339_opts(AutoSi, true)``: UTC, ``Z``, and 0, 3, 6
    or 9 fraction digits, as few as hold it. Raises for a time no year 1-9999 holds."""
    seconds, nanos = divmod(int(time_ns), _NANOS)
    if not 0 <= seconds < 253402300800:
        raise ValueError(f"time out of range: {time_ns}")
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    if nanos == 0:
        return f"{text}Z".encode()
    if nanos % 1_000_000 == 0:
        return f"{text}.{nanos // 1_000_000:03d}Z".encode()
    if nanos % 1000 == 0:
        return f"{text}.{nanos // 1000:06d}Z".encode()
    return f"{text}.{nanos:09d}Z".encode()


def level(severity_number: int) -> int:
    """The EventHeader level of a severity number, as Rust's logs exporter maps it:
    trace and debug 5 (verbose), info 4, warn 3, error 2, fatal 1. Unset (0), which Rust
    refuses, is info, as the default format counts it."""
    if severity_number <= 8:
        return 5 if severity_number >= 1 else 4
    return 4 - (severity_number - 9) // 4


class CloudRole:
    """PartA's ``ext_cloud_role`` and ``ext_cloud_roleInstance``: the resource's
    ``service.name`` and ``service.instance.id`` as text (Rust's ``Value::to_string``).
    Bounded: the fields of the last resource seen are kept, one entry (an exporter's spans
    share one resource). ``redact``, if given, rewrites or removes them as it does
    attributes."""

    def __init__(self, redact: Callable[[str, Any], Any] | None = None) -> None:
        self._redact = redact
        self._last: tuple[object, list[Field]] = (None, [])
        """One attribute, so that threads see a resource with its own fields."""

    def fields(self, resource: Any) -> list[Field]:
        last, fields = self._last
        if resource is not last:
            attributes = getattr(resource, "attributes", None) or {}
            fields = []
            for key, name in (("service.name", _ROLE), ("service.instance.id", _ROLE_INSTANCE)):
                value = attributes.get(key)
                if value is not None and self._redact is not None:
                    value = self._redact(key, value)
                if value is not None:
                    text = value if isinstance(value, str) else str(value)
                    fields.append(eh.string(name, eh.utf8(text)[: eh.MAX_STRING_BYTES]))
            self._last = (resource, fields)
        return fields


def hex_id(value: int, digits: int) -> bytes:
    return b"%0*x" % (digits, value)
