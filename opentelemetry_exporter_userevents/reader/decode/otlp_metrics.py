# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The ``otlp_metrics`` tracepoint as the reader's third record format: the tracepoint the
Rust (opentelemetry-user-events-metrics) and .NET Geneva metric exporters write, and what
a decoded record of it carries.

It is a plain user_events tracepoint, not an EventHeader one: ``user_events:otlp_metrics``
registered as ``otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer`` (single-
format: one per name, so every writer and the reader share it), whose buffer holds an
OTLP ``ExportMetricsServiceRequest`` in protobuf (docs/common-schema.md). The decoder stage
only unpacks the three fields (:class:`OtlpMetricsUnpacker`); the request is parsed and
checked at the validation boundary (:mod:`.otlp_metrics_check`), where a bad record is
counted by reason and writer pid as any other.
"""

from __future__ import annotations

import struct
from typing import Any

from opentelemetry_exporter_userevents.abi.format import EventFormat
from opentelemetry_exporter_userevents.record import otlp_metrics as wire

OTLP_METRICS = wire.NAME
"""The tracepoint's name (in ``user_events``), and how ``--provider`` names it."""
OTLP_METRICS_KIND = "otlp_metrics"
"""The kind of a decoded ``otlp_metrics`` record (:attr:`.TraceRecord.kind`)."""
COMMAND = "otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer"
"""The registration both producers use (the Rust one ends it with ``;``, which the kernel
ignores): a reader that holds the tracepoint must register exactly these fields."""
PROTOCOL = "protocol"
VERSION = "version"
BUFFER = "buffer"
MAX_BUFFER = 0xFFFF
"""The longest buffer: its ``__rel_loc`` gives its size in 16 bits (the Rust exporter
writes at most 65360 bytes, the .NET one what fits its 64 KiB buffer)."""

_U32 = struct.Struct("<I").unpack_from


class OtlpMetricsUnpacker:
    """The decoder stage's part: the protocol, the version's 8 bytes and the buffer."""

    def __init__(self, protocol: int, version: int, buffer: int) -> None:
        self._protocol = protocol
        self._version = version
        self._buffer = buffer
        self._needed = max(protocol + 4, version + 8, buffer + 4)

    def unpack(self, record: bytes | bytearray | memoryview) -> dict[str, Any]:
        """Raises ValueError if the record is too short or its buffer lies outside it."""
        size = len(record)
        if size < self._needed:
            raise ValueError("an otlp_metrics record shorter than its fields")
        loc = _U32(record, self._buffer)[0]
        first = self._buffer + 4 + (loc & 0xFFFF)
        last = first + (loc >> 16)
        if last > size:
            raise ValueError("an otlp_metrics buffer outside its record")
        return {
            PROTOCOL: _U32(record, self._protocol)[0],
            VERSION: bytes(record[self._version : self._version + 8]),
            BUFFER: bytes(record[first:last]),
        }


def otlp_metrics_unpacker(fmt: EventFormat) -> OtlpMetricsUnpacker | None:
    """An unpacker for ``fmt`` if it is the ``otlp_metrics`` tracepoint with the producers'
    fields (a u32 ``protocol``, 8 bytes of ``version``, a ``__rel_loc`` ``buffer``), else
    None."""
    if fmt.name != OTLP_METRICS:
        return None
    try:
        protocol, version, buffer = (fmt.field(n) for n in (PROTOCOL, VERSION, BUFFER))
    except KeyError:
        return None
    if (
        protocol.size != 4
        or version.size != 8
        or buffer.size != 4
        or not buffer.type.startswith("__rel_loc")
    ):
        return None
    return OtlpMetricsUnpacker(protocol.offset, version.offset, buffer.offset)
