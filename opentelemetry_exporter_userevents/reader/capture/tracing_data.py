# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The "tracing data" block: what a capture file says about the kernel that recorded it.

trace-cmd's ``trace.dat`` (version 6) starts with it, and ``perf.data`` carries the same
block in its ``HEADER_TRACING_DATA`` feature section (version ``0.6``): byte order, the size
of a long, the page size, ``events/header_page`` and ``events/header_event``, the ftrace
and event ``format`` files by system, ``/proc/kallsyms``, ``printk_formats`` and, from
version 6, ``saved_cmdlines``. Documented in trace-cmd's ``trace-cmd.dat.v6(5)`` and
written by perf's ``util/trace-event-info.c``. Every size is checked against the bytes
there are: a damaged file gives a :class:`CaptureError` saying where, never a wrong read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry_exporter_userevents.abi.binary import U32, U64

MAGIC = b"\x17\x08\x44tracing"


class CaptureError(ValueError):
    """A capture file that cannot be decoded; the message says what and where."""


@dataclass
class TracingData:
    """The block's contents, as text; format files stay unparsed (the decoder parses the
    ones it wants)."""

    version: str
    """``6`` in trace.dat, ``0.6`` in perf.data."""
    page_size: int
    header_page: str
    header_event: str
    formats: list[tuple[str, str]] = field(default_factory=list)
    """(system, ``format`` file text) of every event the file carries; ftrace's own are
    listed under ``ftrace``."""
    cmdlines: str = ""
    long_size: int = 8


class Cursor:
    """Reads little-endian values from a buffer, with every read bounds-checked."""

    def __init__(self, data: bytes | memoryview, offset: int = 0, what: str = "file") -> None:
        self.data = memoryview(data)
        self.offset = offset
        self.what = what

    def take(self, size: int, item: str) -> memoryview:
        end = self.offset + size
        if size < 0 or end > len(self.data):
            raise CaptureError(
                f"{self.what} is cut short: {item} needs {size} bytes at offset "
                f"{self.offset}, {max(len(self.data) - self.offset, 0)} left"
            )
        chunk = self.data[self.offset : end]
        self.offset = end
        return chunk

    def u16(self, item: str) -> int:
        return int.from_bytes(self.take(2, item), "little")

    def u32(self, item: str) -> int:
        return int(U32.unpack(self.take(4, item))[0])

    def u64(self, item: str) -> int:
        return int(U64.unpack(self.take(8, item))[0])

    def cstring(self, item: str, limit: int = 4096) -> str:
        """A NUL-terminated string of at most ``limit`` bytes."""
        end = bytes(self.data[self.offset : self.offset + limit + 1]).find(b"\0")
        if end < 0:
            raise CaptureError(f"{self.what}: {item} at offset {self.offset} is not terminated")
        text = bytes(self.data[self.offset : self.offset + end]).decode("utf-8", "replace")
        self.offset += end + 1
        return text

    def text(self, size: int, item: str) -> str:
        return bytes(self.take(size, item)).decode("utf-8", "replace")

    def expect(self, literal: bytes, item: str) -> None:
        if bytes(self.take(len(literal), item)) != literal:
            raise CaptureError(f"{self.what}: expected {literal!r} ({item})")


def read_preamble(cursor: Cursor) -> tuple[str, int, int]:
    """Magic, version, byte order, long size and page size: (version, long size, page size).
    Refuses big-endian files (the ring-buffer decoder reads little-endian)."""
    if bytes(cursor.data[cursor.offset : cursor.offset + len(MAGIC)]) != MAGIC:
        raise CaptureError(f"{cursor.what} does not start with the tracing data magic")
    cursor.offset += len(MAGIC)
    version = cursor.cstring("version", 16)
    big_endian = cursor.take(1, "byte order")[0]
    if big_endian:
        raise CaptureError(f"{cursor.what} was recorded on a big-endian machine: not supported")
    long_size = cursor.take(1, "long size")[0]
    page_size = cursor.u32("page size")
    if long_size not in (4, 8) or not 64 <= page_size <= 1 << 20:
        raise CaptureError(f"{cursor.what}: long size {long_size}, page size {page_size}")
    return version, long_size, page_size


def read_headers_and_formats(
    cursor: Cursor, version: str, long_size: int, page_size: int
) -> TracingData:
    """Everything after the preamble, up to and including ``saved_cmdlines`` (version 6)."""
    data = read_header_info(cursor, version, long_size, page_size)
    read_ftrace_formats(cursor, data)
    read_event_formats(cursor, data)
    cursor.take(cursor.u32("kallsyms size"), "kallsyms")
    cursor.take(cursor.u32("printk formats size"), "printk formats")
    if version.endswith("6"):  # "6" (trace.dat) and "0.6" (perf): saved_cmdlines follow
        read_cmdlines(cursor, data)
    return data


def read_header_info(cursor: Cursor, version: str, long_size: int, page_size: int) -> TracingData:
    """``header_page`` and ``header_event`` (trace.dat v7: the HEADER INFO section)."""
    cursor.expect(b"header_page\0", "header_page label")
    header_page = cursor.text(cursor.u64("header_page size"), "header_page")
    cursor.expect(b"header_event\0", "header_event label")
    header_event = cursor.text(cursor.u64("header_event size"), "header_event")
    return TracingData(version, page_size, header_page, header_event, long_size=long_size)


def read_ftrace_formats(cursor: Cursor, data: TracingData) -> None:
    for _ in range(cursor.u32("ftrace format count")):
        data.formats.append(("ftrace", cursor.text(cursor.u64("format size"), "ftrace format")))


def read_event_formats(cursor: Cursor, data: TracingData) -> None:
    for _ in range(cursor.u32("system count")):
        system = cursor.cstring("system name")
        for _ in range(cursor.u32(f"{system} event count")):
            data.formats.append((system, cursor.text(cursor.u64("format size"), "format")))


def read_cmdlines(cursor: Cursor, data: TracingData) -> None:
    data.cmdlines = cursor.text(cursor.u64("cmdlines size"), "cmdlines")


def read_tracing_data(cursor: Cursor) -> TracingData:
    """The whole block (perf.data's feature section; trace.dat's start)."""
    version, long_size, page_size = read_preamble(cursor)
    return read_headers_and_formats(cursor, version, long_size, page_size)


def write_tracing_data(data: TracingData) -> bytes:
    """The block as trace-cmd writes it (version ``data.version``, little-endian)."""
    out = bytearray(MAGIC)
    out += data.version.encode() + b"\0"
    out += bytes([0, data.long_size]) + U32.pack(data.page_size)
    for label, text in (("header_page", data.header_page), ("header_event", data.header_event)):
        encoded = text.encode()
        out += label.encode() + b"\0" + U64.pack(len(encoded)) + encoded
    ftrace = [text.encode() for system, text in data.formats if system == "ftrace"]
    out += U32.pack(len(ftrace))
    for encoded in ftrace:
        out += U64.pack(len(encoded)) + encoded
    systems: dict[str, list[bytes]] = {}
    for system, text in data.formats:
        if system != "ftrace":
            systems.setdefault(system, []).append(text.encode())
    out += U32.pack(len(systems))
    for system, texts in systems.items():
        out += system.encode() + b"\0" + U32.pack(len(texts))
        for encoded in texts:
            out += U64.pack(len(encoded)) + encoded
    out += U32.pack(0) + U32.pack(0)  # no kallsyms, no printk formats
    cmdlines = data.cmdlines.encode()
    out += U64.pack(len(cmdlines)) + cmdlines
    return bytes(out)
