# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Capture files built on the host: format files as the kernel prints them, and a
perf.data laid out as perf writes one (tools/perf/Documentation/perf.data-file-format.txt)."""

from __future__ import annotations

import struct

from opentelemetry_exporter_userevents.reader.capture.perf_data import (
    SAMPLE_CPU,
    SAMPLE_IDENTIFIER,
    SAMPLE_IP,
    SAMPLE_PERIOD,
    SAMPLE_RAW,
    SAMPLE_TID,
    SAMPLE_TIME,
)
from opentelemetry_exporter_userevents.reader.capture.tracing_data import (
    TracingData,
    write_tracing_data,
)
from opentelemetry_exporter_userevents.record.schema import Schema
from tests.support.pages import HEADER_PAGE
from tests.support.records import format_of

HEADER_EVENT = "# compressed entry header\n\ttype_len    :    5 bits\n"
COMMON = (
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
)
PERF_SAMPLE_TYPE = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_PERIOD | SAMPLE_RAW


def format_text(schema: Schema, name: str, event_id: int) -> str:
    """``events/<system>/<name>/format`` as Linux 6.12 prints it for ``schema``."""
    lines = [f"name: {name}", f"ID: {event_id}", "format:", COMMON]
    for field in format_of(schema, name, event_id).fields:
        array = "[]" if field.is_array else ""
        lines.append(
            f"\tfield:{field.type} {field.name}{array};\toffset:{field.offset};"
            f"\tsize:{field.size};\tsigned:{int(field.signed)};"
        )
    lines += ["", 'print fmt: "%d", REC->x', ""]
    return "\n".join(lines)


def tracing_data(formats: list[tuple[str, str]], version: str = "0.6") -> TracingData:
    return TracingData(version, 4096, HEADER_PAGE, HEADER_EVENT, formats)


def perf_sample(raw: bytes, time: int, cpu: int = 0, sample_type: int = PERF_SAMPLE_TYPE,
                sample_id: int = 0) -> bytes:  # fmt: skip
    """A PERF_RECORD_SAMPLE, fields in perf_event.h order, raw padded to 8 bytes."""
    body = b""
    if sample_type & SAMPLE_IDENTIFIER:
        body += struct.pack("<Q", sample_id)
    body += struct.pack("<QIIQIIQ", 0xFFFF8000, 42, 42, time, cpu, 0, 1)
    padded = raw + bytes(-(len(raw) + 4) % 8)
    body += struct.pack("<I", len(padded)) + padded
    return struct.pack("<IHH", 9, 2, 8 + len(body)) + body


def perf_data(
    formats: list[tuple[str, str]],
    records: list[bytes],
    sample_types: tuple[int, ...] = (PERF_SAMPLE_TYPE,),
) -> bytes:
    """A perf.data file: header, attrs (one per sample type, ids 1..n), data, then the
    HEADER_TRACING_DATA section."""
    attr_size = 136 + 16
    header_size = 104
    attrs_offset = header_size
    ids_offset = attrs_offset + attr_size * len(sample_types)
    data_offset = ids_offset + 8 * len(sample_types)
    data = b"".join(records)
    tracing = write_tracing_data(tracing_data(formats))
    sections_offset = data_offset + len(data)
    tracing_offset = sections_offset + 16
    attrs = b""
    for number, sample_type in enumerate(sample_types):
        attr = struct.pack("<IIQQQQ", 2, 136, 1, 1, sample_type, 0).ljust(136, b"\0")
        attrs += attr + struct.pack("<QQ", ids_offset + 8 * number, 8)
    header = (
        b"PERFILE2"
        + struct.pack("<QQ", header_size, attr_size)
        + struct.pack("<QQ", attrs_offset, len(attrs))
        + struct.pack("<QQ", data_offset, len(data))
        + struct.pack("<QQ", 0, 0)
        + (1 << 1).to_bytes(32, "little")
    )
    ids = b"".join(struct.pack("<Q", n + 1) for n in range(len(sample_types)))
    return header + attrs + ids + data + struct.pack("<QQ", tracing_offset, len(tracing)) + tracing
