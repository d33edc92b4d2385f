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


def _section(section_id: int, body: bytes, compress=None) -> bytes:
    """A v7 section: id, flags, string id, size; a compressed body is csize, usize, data."""
    if compress is not None:
        packed = compress(body)
        body = struct.pack("<II", len(packed), len(body)) + packed
    return struct.pack("<HHIQ", section_id, int(compress is not None), 0, len(body)) + body


def trace_dat_v7(
    formats: list[tuple[str, str]],
    cpu_pages: dict[int, list[bytes]],
    compression: str = "zstd",
    compress=None,
    chunk_pages: int = 2,
) -> bytes:
    """A trace.dat version 7 laid out as trace-cmd 3.1.6 writes one (``trace-cmd dump``):
    header info, formats and cmdlines sections, options pointing to them, a BUFFER option
    for the top instance, its flyrecord section, each CPU's pages in compressed chunks."""
    out = bytearray(b"\x17\x08\x44tracing7\0\0\x08" + struct.pack("<I", 4096))
    out += compression.encode() + b"\0" + b"1.0\0"
    first_options_at = len(out)
    out += bytes(8)
    offsets = {}
    ftrace = [text.encode() for system, text in formats if system == "ftrace"]
    events: dict[str, list[bytes]] = {}
    for system, text in formats:
        if system != "ftrace":
            events.setdefault(system, []).append(text.encode())
    event_formats = struct.pack("<I", len(events))
    for system, texts in events.items():
        event_formats += system.encode() + b"\0" + _sized(texts, "<I")
    bodies = {
        16: _header_info(tracing_data(formats, "7")),
        17: _sized(ftrace, "<I"),
        18: event_formats,
        21: struct.pack("<Q", 7) + b"1 init\n",
    }
    for section_id, body in bodies.items():
        offsets[section_id] = len(out)
        out += _section(section_id, body, compress)
    buffer_at = len(out)
    out += struct.pack("<HHIQ", 3, int(compress is not None), 0, 0)
    out += bytes(-len(out) % 4096)
    cpus = []
    for cpu, pages in cpu_pages.items():
        start = len(out)
        if compress is None:
            out += b"".join(pages)
        else:
            chunks = [
                b"".join(pages[n : n + chunk_pages]) for n in range(0, len(pages), chunk_pages)
            ]
            out += struct.pack("<I", len(chunks))
            for chunk in chunks:
                packed = compress(chunk)
                out += struct.pack("<II", len(packed), len(chunk)) + packed
        size = len(out) - start
        cpus.append((cpu, start, size if compress is None else size - 4))  # not the count
    options = b""
    for section_id, offset in offsets.items():
        options += struct.pack("<HIQ", section_id, 8, offset)
    buffer = struct.pack("<Q", buffer_at) + b"\0" + b"local\0" + struct.pack("<II", 4096, len(cpus))
    buffer += b"".join(struct.pack("<IQQ", cpu, offset, size) for cpu, offset, size in cpus)
    options += struct.pack("<HI", 3, len(buffer)) + buffer
    options += struct.pack("<HIQ", 0, 8, 0)
    out[first_options_at : first_options_at + 8] = struct.pack("<Q", len(out))
    out += _section(0, options)
    return bytes(out)


def _header_info(tracing: TracingData) -> bytes:
    page, event = tracing.header_page.encode(), tracing.header_event.encode()
    return (b"header_page\0" + struct.pack("<Q", len(page)) + page
            + b"header_event\0" + struct.pack("<Q", len(event)) + event)  # fmt: skip


def _sized(texts: list[bytes], count: str) -> bytes:
    """A count, then each text after its u64 size."""
    return struct.pack(count, len(texts)) + b"".join(struct.pack("<Q", len(t)) + t for t in texts)
