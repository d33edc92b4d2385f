# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""trace.dat version 7 (``trace-cmd.dat.v7(5)``), what trace-cmd 3.x writes by default.

After the preamble: the compression (``name\\0version\\0``; Debian's trace-cmd 3.1.6 writes
``zstd``) and the offset of the first options section. Sections start with ``id:u16
flags:u16 string:u32 size:u64``; flag 1 means the body is ``csize:u32 usize:u32`` and a
compressed block. Options (``id:u16 size:u32 data``) point to the sections: 16 header
info, 17 ftrace formats, 18 event formats, 21 cmdlines; 3 (BUFFER) describes an instance's
flyrecord section and where each CPU's data is; 0 (DONE) gives the next options section.
A compressed CPU's data is ``count:u32`` chunks of ``csize:u32 usize:u32 data``: their
framing is checked when the file is opened, and each chunk is inflated only when its pages
are read, so memory holds one chunk per CPU, not a CPU's whole stream; every chunk is
bounded (:mod:`.compression`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from opentelemetry_exporter_userevents.reader.capture.compression import (
    MAX_CHUNK,
    Buffer,
    Decompressor,
    decompressor,
)
from opentelemetry_exporter_userevents.reader.capture.trace_dat import (
    OPTION_BUFFER,
    TraceDat,
    clip,
    clock_name,
)
from opentelemetry_exporter_userevents.reader.capture.tracing_data import (
    CaptureError,
    Cursor,
    read_cmdlines,
    read_event_formats,
    read_ftrace_formats,
    read_header_info,
    read_preamble,
)

OPTION_DONE = 0
SECTION_BUFFER = 3
SECTION_OPTIONS = 0
SECTION_HEADER_INFO = 16
SECTION_FTRACE_EVENTS = 17
SECTION_EVENT_FORMATS = 18
SECTION_CMDLINES = 21
COMPRESSED = 1
_MAX_OPTION_SECTIONS = 1024
MAX_INFLATED_AT_ONCE = 512 << 20
"""Decoding merges the CPUs, so it holds one inflated chunk of each at once: a file whose
CPUs' largest chunks add up to more (512 MiB; trace-cmd's chunks are a few pages) is
refused when opened."""


@dataclass
class _Buffer:
    offset: int
    name: str
    page_size: int
    clock: str = ""
    cpus: list[tuple[int, int, int]] = field(default_factory=list)
    """(cpu, offset, size) of each CPU's data."""


class _File:
    def __init__(self, cursor: Cursor, inflate: Decompressor | None) -> None:
        self.data = cursor.data
        self.inflate = inflate

    def section(self, offset: int, expected: int | None, what: str) -> tuple[int, Cursor]:
        """(flags, body) of the section at ``offset``, its body inflated."""
        head = Cursor(self.data, offset, f"trace.dat {what} section")
        section_id, flags = head.u16("section id"), head.u16("section flags")
        head.u32("section name")
        size = head.u64("section size")
        if expected is not None and section_id != expected:
            raise CaptureError(f"trace.dat: section {section_id} where {what} should be")
        body = Cursor(head.take(size, "section body"), what=f"trace.dat {what} section")
        if flags & COMPRESSED and section_id != SECTION_BUFFER:  # its CPUs' data are chunked
            body = Cursor(memoryview(self.block(body)), what=body.what)
        return flags, body

    def block(self, cursor: Cursor) -> Buffer:
        """One compressed block: ``csize:u32 usize:u32 data``."""
        compressed, size = self.block_header(cursor)
        return self.decompressor(cursor)(compressed, size)

    def block_header(self, cursor: Cursor) -> tuple[memoryview, int]:
        """(compressed data, uncompressed size) of the block at the cursor, not inflated;
        a size beyond :data:`.MAX_CHUNK` is refused here."""
        compressed, size = cursor.u32("compressed size"), cursor.u32("uncompressed size")
        if size > MAX_CHUNK:
            raise CaptureError(
                f"{cursor.what}: a compressed block declares {size} bytes uncompressed "
                f"(at most {MAX_CHUNK} are accepted)"
            )
        return cursor.take(compressed, "compressed block"), size

    def decompressor(self, cursor: Cursor) -> Decompressor:
        if self.inflate is None:
            raise CaptureError(f"{cursor.what} is marked compressed in an uncompressed file")
        return self.inflate


def read_trace_dat_v7(data: bytes | memoryview) -> TraceDat:
    """Parse a version 7 trace.dat held in memory (or mapped); raises :class:`CaptureError`."""
    cursor = Cursor(data, what="trace.dat")
    version, long_size, page_size = read_preamble(cursor)
    if version != "7":
        raise CaptureError(f"trace.dat version {version}, not 7")
    compression = cursor.cstring("compression name", 64)
    cursor.cstring("compression version", 64)
    file = _File(cursor, decompressor(compression))
    offsets: dict[int, int] = {}
    buffers: list[_Buffer] = []
    next_options = cursor.u64("first options offset")
    seen: set[int] = set()
    while next_options:
        if next_options in seen or len(seen) >= _MAX_OPTION_SECTIONS:
            raise CaptureError("trace.dat: the options sections loop")
        seen.add(next_options)
        _, body = file.section(next_options, SECTION_OPTIONS, "options")
        next_options = _options(body, offsets, buffers)

    def section(section_id: int, what: str) -> Cursor:
        if section_id not in offsets:
            raise CaptureError(f"trace.dat has no {what} section")
        return file.section(offsets[section_id], section_id, what)[1]

    tracing = read_header_info(section(SECTION_HEADER_INFO, "header info"), "7", long_size,
                               page_size)  # fmt: skip
    if SECTION_FTRACE_EVENTS in offsets:
        read_ftrace_formats(section(SECTION_FTRACE_EVENTS, "ftrace formats"), tracing)
    read_event_formats(section(SECTION_EVENT_FORMATS, "event formats"), tracing)
    if SECTION_CMDLINES in offsets:
        read_cmdlines(section(SECTION_CMDLINES, "cmdlines"), tracing)
    dat = TraceDat(tracing, [], compression=compression)
    at_once = 0
    for buffer in buffers:
        if buffer.name:
            dat.instance_buffers.append(buffer.name)
            continue
        if buffer.page_size != page_size:
            raise CaptureError(f"trace.dat: buffer page size {buffer.page_size} != {page_size}")
        flags, _ = file.section(buffer.offset, SECTION_BUFFER, "flyrecord")
        dat.clock = clock_name(buffer.clock)
        for cpu, offset, size in buffer.cpus:
            # Compressed, the size counts the chunks but not the chunk count before them
            # (trace-cmd 3.1.6; the v7 documentation does not say).
            blob, missing = clip(file.data, offset, size + 4 if flags & COMPRESSED else size)
            dat.cut_short += missing
            if missing:
                dat.missing_cpus.append(cpu)
            if flags & COMPRESSED and not missing:
                chunks = _Chunks(file, Cursor(blob, what=f"CPU {cpu} data"))
                at_once += chunks.largest
                dat.cpu_data.append((cpu, chunks))
            elif not flags & COMPRESSED:
                dat.cpu_data.append((cpu, blob))
    if at_once > MAX_INFLATED_AT_ONCE:
        raise CaptureError(
            f"trace.dat: decoding would hold {at_once} bytes of inflated chunks at once "
            f"(the largest of each CPU; at most {MAX_INFLATED_AT_ONCE} are accepted)"
        )
    return dat


def _options(body: Cursor, offsets: dict[int, int], buffers: list[_Buffer]) -> int:
    """Read one options section; return the offset of the next (0: none)."""
    while True:
        option, size = body.u16("option id"), body.u32("option size")
        data = Cursor(body.take(size, f"option {option}"), what=f"trace.dat option {option}")
        if option == OPTION_DONE:
            return data.u64("next options offset")
        if SECTION_HEADER_INFO <= option <= SECTION_CMDLINES:
            offsets[option] = data.u64("section offset")
        elif option == OPTION_BUFFER:
            buffer = _Buffer(data.u64("buffer offset"), data.cstring("buffer name"), 0)
            buffer.clock = data.cstring("buffer clock", 64)
            buffer.page_size = data.u32("buffer page size")
            for _ in range(data.u32("buffer CPU count")):
                cpu = data.u32("CPU id")
                buffer.cpus.append((cpu, data.u64("CPU data offset"), data.u64("CPU data size")))
            buffers.append(buffer)


class _Chunks:
    """A CPU's compressed pages: ``count:u32`` blocks, framing read now (a damaged or cut
    file is refused before any record is decoded), each block inflated only when iteration
    reaches it (and iterating again inflates again: nothing is kept)."""

    def __init__(self, file: _File, cursor: Cursor) -> None:
        self.file, self.inflate = file, file.decompressor(cursor)
        self.count = cursor.u32("chunk count")
        self.start = Cursor(cursor.data, cursor.offset, cursor.what)
        self.largest = 0
        for _ in range(self.count):  # walked again when iterated: nothing kept per chunk
            self.largest = max(self.largest, file.block_header(cursor)[1])

    def __iter__(self) -> Iterator[Buffer]:
        cursor = Cursor(self.start.data, self.start.offset, self.start.what)
        for _ in range(self.count):
            yield self.inflate(*self.file.block_header(cursor))
