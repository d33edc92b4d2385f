# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The ``otlp_metrics`` tracepoint, as the metric exporters of EventHeader pipelines write
it (opentelemetry-rust-contrib's ``opentelemetry-user-events-metrics``, .NET's Geneva
exporter; docs/common-schema.md): a plain single-format tracepoint, not an EventHeader
one, shared by every writer and reader by its name, whose ``buffer`` holds one OTLP
``ExportMetricsServiceRequest`` in protobuf. Our metric exporter writes it with
``format="eventheader"``; the reader's decoder takes the name, protocol and version from
here (the read and write sides share only this layer)."""

from __future__ import annotations

import struct

from opentelemetry_exporter_userevents.record.schema import Field, Schema

NAME = "otlp_metrics"
"""The tracepoint's name in ``user_events``: the same in every process, unversioned."""
PROTOCOL_PROTOBUF = 0
"""``protocol``: the buffer is protobuf (what both producers write)."""
VERSION = b"v0.19.00"
"""``version``: the OTLP protobuf definitions' version both producers name."""
MAX_BUFFER = 65360
"""The largest buffer the Rust exporter writes (``MAX_EVENT_SIZE``); the ``__rel_loc``
carries up to 65535. A record must also fit ``max_record_size`` (the ring buffer's)."""

TRACEPOINT = Schema(
    NAME,
    [
        Field("protocol", "u32", "0: the buffer is protobuf."),
        Field("version", "char[8]", "The OTLP protobuf version, v0.19.00."),
        Field("buffer", "__rel_loc u8[]", "One ExportMetricsServiceRequest (size << 16)."),
    ],
    "One OTLP request of one data point, as the Rust and .NET metric exporters write it.",
)
"""Registered as ``otlp_metrics u32 protocol; char[8] version; __rel_loc u8[] buffer``:
the producers' fields (the kernel reads past the spaces), or the kernel refuses a second
writer's registration of the name."""

_HEADER = struct.Struct("<I8sI")
HEADER_SIZE = _HEADER.size
"""The bytes before the buffer: protocol, version, and the buffer's ``__rel_loc``."""


def payload(buffer: bytes) -> bytes:
    """A record: protocol 0, the version, the buffer right after its ``__rel_loc`` (offset
    0, size in the high 16 bits), as the Rust exporter writes it. ``buffer`` must be at
    most 65535 bytes (ValueError)."""
    if len(buffer) > 0xFFFF:
        raise ValueError(f"an otlp_metrics buffer of {len(buffer)} bytes (at most 65535)")
    return _HEADER.pack(PROTOCOL_PROTOBUF, VERSION, len(buffer) << 16) + buffer
