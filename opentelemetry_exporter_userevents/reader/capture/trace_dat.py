# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""trace-cmd's ``trace.dat``: read what ``trace-cmd record`` wrote (versions 6 and 7), and
write a version 6 file ``trace-cmd report`` reads.

Version 6 (``trace-cmd.dat.v6(5)``): the tracing data block (:mod:`.tracing_data`), the
number of CPUs, options (``id:u16 size:u32 data``, ending with id 0), then ``flyrecord``
and one (offset, size) per CPU, each CPU's ring-buffer pages copied as the kernel wrote
them, page-aligned. Version 7 (``trace-cmd.dat.v7(5)``, trace-cmd 3.x's default, see
:mod:`.trace_dat_v7`) puts the same contents in sections that options point to, most of
them compressed. Only the top-level buffer is read; instance buffers (``record -B``) are
named, not read.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import struct
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from opentelemetry_exporter_userevents.abi.binary import U32 as _U32
from opentelemetry_exporter_userevents.abi.binary import U64 as _U64
from opentelemetry_exporter_userevents.reader.capture.tracing_data import (
    CaptureError,
    Cursor,
    TracingData,
    read_headers_and_formats,
    read_preamble,
    write_tracing_data,
)
from opentelemetry_exporter_userevents.reader.private_file import open_private

VERSION = "6"
OPTION_BUFFER = 3
"""A trace-cmd instance buffer (``record -B``)."""
OPTION_TRACECLOCK = 4
"""Version 6: the top buffer's ``trace_clock`` file follows its CPUs' table (``size:u64``
then the text, e.g. ``[local] global counter ...``)."""
MAX_CLOCK_TEXT = 4096
_U16 = struct.Struct("<H")
_OPTIONS = b"options  \0"
_FLYRECORD = b"flyrecord\0"
_LATENCY = b"latency  \0"

CpuData = bytes | memoryview | Iterable[bytes | bytearray | memoryview]
"""A CPU's pages back to back, or the chunks they come in (inflated as they are reached)."""


@dataclass
class TraceDat:
    """A trace.dat: its tracing data and each CPU's pages."""

    tracing: TracingData
    cpu_data: list[tuple[int, CpuData]]
    """(cpu, its pages back to back, clipped to the file); or, compressed (version 7), its
    chunks, each inflated only when iteration reaches it."""
    instance_buffers: list[str] = field(default_factory=list)
    """Names of trace-cmd instance buffers in the file (not read)."""
    cut_short: int = 0
    """Bytes of CPU data the header announces beyond the end of the file."""
    compression: str = "none"
    clock: str | None = None
    """The trace clock the top buffer was recorded with (``local`` by default), when the
    file says."""
    missing_cpus: list[int] = field(default_factory=list)
    """CPUs whose data the file announces but does not hold whole (cut short)."""
    name: str = ""
    """An instance buffer's name; the top buffer's is empty."""
    instances: list[TraceDat] = field(default_factory=list)
    """The instance buffers read (each with the top's tracing data): decoded only for the
    kernel view (``decode --kernel``), where one holds the kernel's events."""

    def cpu_pages(self) -> list[tuple[int, Iterator[memoryview]]]:
        """Each CPU's whole pages, in the order the kernel filled them, read as they are
        iterated: a compressed CPU's chunks are inflated one at a time, so memory holds at
        most one chunk per CPU (and a page split between two chunks). An inflation error
        is raised (:class:`CaptureError`) when iteration reaches the chunk."""
        return [(cpu, _pages_of(data, self.tracing.page_size)) for cpu, data in self.cpu_data]

    def pages(self) -> Iterator[tuple[int, memoryview]]:
        """(cpu, page) for every whole page, CPU by CPU, in the order the kernel filled them."""
        for cpu, pages in self.cpu_pages():
            for page in pages:
                yield cpu, page


def _pages_of(data: CpuData, page_size: int) -> Iterator[memoryview]:
    """Whole pages of a CPU's data; a page split between two chunks is joined, and a
    partial page at the end is left out."""
    rest = b""
    for chunk in (data,) if isinstance(data, (bytes, memoryview)) else data:
        view = memoryview(chunk)
        if rest:
            need = page_size - len(rest)
            joined, view = rest + bytes(view[:need]), view[need:]
            if len(joined) < page_size:
                rest = joined
                continue
            yield memoryview(joined)
        whole = len(view) - len(view) % page_size
        for start in range(0, whole, page_size):
            yield view[start : start + page_size]
        rest = bytes(view[whole:])


def read_trace_dat(data: bytes | memoryview) -> TraceDat:
    """Parse a version 6 trace.dat held in memory (or mapped); raises :class:`CaptureError`."""
    cursor = Cursor(data, what="trace.dat")
    version, long_size, page_size = read_preamble(cursor)
    if version != VERSION:
        raise CaptureError(f"trace.dat version {version} is not supported (6 and 7 are)")
    # (version 7 is read by trace_dat_v7.read_trace_dat_v7)
    tracing = read_headers_and_formats(cursor, version, long_size, page_size)
    cpus = cursor.u32("CPU count")
    if cpus > 4096:
        raise CaptureError(f"trace.dat: {cpus} CPUs")
    buffers: list[tuple[int, str]] = []
    has_clock = False
    label = bytes(cursor.take(10, "section label"))
    while label == _OPTIONS:
        while (option := cursor.u16("option id")) != 0:
            body = Cursor(cursor.take(cursor.u32("option size"), f"option {option}"))
            has_clock |= option == OPTION_TRACECLOCK
            if option == OPTION_BUFFER:
                buffers.append((body.u64("buffer offset"), body.cstring("buffer name")))
        label = bytes(cursor.take(10, "section label"))
    if label == _LATENCY:
        raise CaptureError("trace.dat holds a latency trace (text), not ring-buffer pages")
    if label != _FLYRECORD:
        raise CaptureError(f"trace.dat: unknown section {label!r}")
    dat = _flyrecord(cursor, TraceDat(tracing, []), cpus, has_clock)
    dat.instance_buffers = [name for _, name in buffers]
    for offset, name in buffers:  # trace-cmd's instance buffer: its own table and clock
        at = Cursor(cursor.data, offset, f"trace.dat buffer {name}")
        with contextlib.suppress(CaptureError):  # not read: it stays named only
            at.expect(_FLYRECORD, "buffer label")
            dat.instances.append(_flyrecord(at, TraceDat(tracing, [], name=name), cpus, has_clock))
    return dat


def _flyrecord(cursor: Cursor, dat: TraceDat, cpus: int, has_clock: bool) -> TraceDat:
    """A buffer's table of each CPU's (offset, size), and its clock if the file says."""
    for cpu in range(cpus):
        offset, size = cursor.u64(f"CPU {cpu} offset"), cursor.u64(f"CPU {cpu} size")
        blob, missing = clip(cursor.data, offset, size)
        dat.cpu_data.append((cpu, blob))
        dat.cut_short += missing
        if missing:
            dat.missing_cpus.append(cpu)
    if has_clock:
        with contextlib.suppress(CaptureError):  # no clock said: it is estimated
            size = cursor.u64("trace_clock size")
            dat.clock = clock_name(cursor.text(min(size, MAX_CLOCK_TEXT), "trace_clock"))
    return dat


def clock_name(text: str) -> str | None:
    """The clock in use in a ``trace_clock`` file's text (the one in brackets), or a bare
    clock name; None if it says neither."""
    text = text.strip()
    if "[" in text:
        text = text.split("[", 1)[1].split("]", 1)[0]
    name = text.strip()
    ok = 0 < len(name) <= 32 and all(c.isalnum() or c in "-_" for c in name)
    return name if ok else None


def clip(data: memoryview, offset: int, size: int) -> tuple[memoryview, int]:
    """``size`` bytes at ``offset``, or what the file has of them; (bytes, bytes missing)."""
    available = max(0, min(size, len(data) - offset))
    return data[offset : offset + available], size - available


class SpoolKeptError(OSError):
    """The trace.dat could not be written; the pages were kept in their spool files, which
    the message names with the command that makes the trace.dat from them."""

    def __init__(self, code: int | None, message: str, spool_dir: str) -> None:
        super().__init__(code, message)
        self.spool_dir = spool_dir

    def __str__(self) -> str:
        return str(self.strerror)


class TraceDatWriter:
    """Writes a version 6 trace.dat from pages as they are read.

    Pages are spooled per CPU in files (0600, :mod:`..private_file`) in a private directory
    (0700) beside ``path``, so a long capture does not sit in memory; :meth:`close` writes
    the header, with the format files of every event added, then each CPU's pages. If that
    fails (disk full, ``path`` a directory), nothing captured is lost: :meth:`keep` leaves
    the spools and a ``header`` file beside them, whose concatenation is the trace.dat.

    Pages of a named buffer (an instance, as ``trace-cmd record -B`` keeps one) follow the
    top buffer's, each buffer after a ``flyrecord`` table of its own that a ``BUFFER``
    option points to, as trace-cmd writes version 6. ``clock``, the file's one trace clock
    (version 6 has one for all buffers), is said in a ``TRACECLOCK`` option.
    """

    def __init__(
        self,
        path: str,
        page_size: int,
        header_page: str,
        header_event: str,
        clock: str | None = None,
    ) -> None:
        self.path = path
        self.tracing = TracingData(VERSION, page_size, header_page, header_event)
        self.clock = clock
        self.spool_dir = tempfile.mkdtemp(
            prefix=".capture-", dir=os.path.dirname(os.path.abspath(path))
        )
        self._spools: dict[int, BinaryIO] = {}
        """The top buffer's, by CPU."""
        self._buffers: dict[str, dict[int, BinaryIO]] = {}
        """Named buffers', in the order their first page came."""
        self._formats: set[tuple[str, str]] = set()
        self.pages = 0
        self.closed = False
        self._kept: str | None = None

    def add_format(self, system: str, text: str) -> None:
        """Carry this ``format`` file (once, however often it is added)."""
        if (system, text) not in self._formats:
            self._formats.add((system, text))
            self.tracing.formats.append((system, text))

    def add_page(self, cpu: int, page: bytes, buffer: str = "") -> None:
        """Append one sub-buffer of ``cpu`` (padded to the page size), to the top buffer or
        the named one. If the spool cannot take it (disk full), it is cut back to its
        whole pages and the error raised."""
        spools = self._spools if not buffer else self._buffers.setdefault(buffer, {})
        spool = spools.get(cpu)
        path = self._spool_path(cpu, buffer)
        if spool is None:
            # unbuffered: a write that fails leaves nothing behind to be written later
            spool = spools[cpu] = open_private(path, "w+b", buffering=0)
        size = self.tracing.page_size
        end = spool.tell()
        data = memoryview(page[:size] + bytes(max(0, size - len(page))))
        try:
            while data:
                data = data[spool.write(data) :]  # a short write (disk full) goes on, or raises
        except OSError as error:
            with contextlib.suppress(OSError):
                spool.truncate(end)
                spool.seek(end)
            raise OSError(error.errno, error.strerror, path) from error
        self.pages += 1

    def close(self, cmdlines: str = "") -> None:
        """Write the file (idempotent); the spools go away. If it cannot be written, the
        spools are kept (:meth:`keep`) and :class:`SpoolKeptError` says where."""
        if self.closed:
            return
        self.tracing.cmdlines = cmdlines
        parts = self._layout()
        created = False
        try:
            with open_private(self.path, "wb") as out:
                created = True
                for header, spools in parts:
                    out.write(header)
                    for spool in spools:
                        spool.seek(0)
                        while chunk := spool.read(1 << 20):
                            out.write(chunk)
        except OSError as error:
            if created:  # a partial trace.dat would mislead, and holds the space a retry needs
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            kept = self.keep(cmdlines)
            raise SpoolKeptError(
                error.errno,
                f"could not write {self.path}: {_reason(error)}; {kept}",
                self.spool_dir,
            ) from error
        self.closed = True
        for spool in self._all_spools():
            spool.close()
        shutil.rmtree(self.spool_dir, ignore_errors=True)

    def keep(self, cmdlines: str = "") -> str:
        """Leave the pages where they are, with a ``header`` file beside them (the trace.dat
        is the header then each CPU's spool, concatenated; a named buffer's header and
        spools follow); say where and how to make the trace.dat. Idempotent; :meth:`close`
        does nothing afterwards."""
        if self._kept is not None:
            return self._kept
        self.closed = True
        self.tracing.cmdlines = cmdlines
        headers = [header for header, _ in self._layout()]
        for spool in self._all_spools():
            with contextlib.suppress(OSError):
                spool.close()
        self._kept = self._keep(headers)
        return self._kept

    def _keep(self, headers: list[bytes]) -> str:
        names = ["header"] + [f"header-buffer{n}" for n in range(1, len(headers))]
        buffers = [("", self._spools), *self._buffers.items()]
        parts: list[str] = []
        pages = f"{self.pages} pages kept in {self.spool_dir}"
        for name, header, (buffer, spools) in zip(names, headers, buffers, strict=True):
            path = os.path.join(self.spool_dir, name)
            try:
                with open_private(path, "wb") as out:
                    out.write(header)
            except OSError as error:
                with contextlib.suppress(OSError):
                    os.unlink(path)
                spooled = [self._spool_path(c, b) for b, c in self._spool_keys()]
                listed = shlex.join(spooled) or "no pages"
                return f"{pages} ({listed}; its header could not be written: {_reason(error)})"
            parts += [path] + [self._spool_path(cpu, buffer) for cpu in sorted(spools)]
        command = f"cat {shlex.join(parts)} > {shlex.quote(self.path)}"
        return f"{pages}; make the trace.dat with: {command}"

    def _spool_path(self, cpu: int, buffer: str = "") -> str:
        """``cpuN``; a named buffer's (added before): ``bufferK-cpuN``, K its rank."""
        if not buffer:
            return os.path.join(self.spool_dir, f"cpu{cpu}")
        number = list(self._buffers).index(buffer) + 1
        return os.path.join(self.spool_dir, f"buffer{number}-cpu{cpu}")

    def _spool_keys(self) -> list[tuple[str, int]]:
        keys = [("", cpu) for cpu in sorted(self._spools)]
        return keys + [(b, cpu) for b, spools in self._buffers.items() for cpu in sorted(spools)]

    def _all_spools(self) -> list[BinaryIO]:
        return [*self._spools.values(), *(s for b in self._buffers.values() for s in b.values())]

    def _layout(self) -> list[tuple[bytes, list[BinaryIO]]]:
        """Each buffer's header and its CPUs' spools, in file order. The first header is
        the file's: the tracing data, the CPU count, the options, then the top buffer's
        table of each CPU's (offset, size) and its clock; a named buffer's is its own
        ``flyrecord`` table and clock. Each header is padded to a page."""
        page_size = self.tracing.page_size
        cpus = 1 + max((c for _, c in self._spool_keys()), default=-1)
        clock = b""
        if self.clock is not None:
            text = f"[{self.clock}]\n".encode()
            clock = _U64.pack(len(text)) + text
        named = list(self._buffers)
        head = bytearray(write_tracing_data(self.tracing))
        head += _U32.pack(cpus)
        if self.clock is not None or named:
            head += _OPTIONS
            if self.clock is not None:
                head += _U16.pack(OPTION_TRACECLOCK) + _U32.pack(0)
            buffer_options = []
            for name in named:
                encoded = name.encode() + b"\0"
                head += _U16.pack(OPTION_BUFFER) + _U32.pack(8 + len(encoded))
                buffer_options.append(len(head))
                head += bytes(8) + encoded
            head += _U16.pack(0)
        table = len(_FLYRECORD) + 16 * cpus + len(clock)
        buffers = [self._spools, *(self._buffers[name] for name in named)]
        offset = _aligned(len(head) + table, page_size)
        headers: list[bytearray] = [head]
        for number, spools in enumerate(buffers):
            header = headers[0] if number == 0 else bytearray()
            if number:
                _U64.pack_into(headers[0], buffer_options[number - 1], offset)
                offset += _aligned(table, page_size)
            header += _FLYRECORD
            for cpu in range(cpus):
                spool = spools.get(cpu)
                size = spool.seek(0, os.SEEK_END) if spool else 0
                header += _U64.pack(offset) + _U64.pack(size)
                offset += size
            header += clock
            header += bytes(-len(header) % page_size)
            if number:
                headers.append(header)
        return [
            (bytes(header), [spools[cpu] for cpu in sorted(spools)])
            for header, spools in zip(headers, buffers, strict=True)
        ]


def _aligned(size: int, page_size: int) -> int:
    return -(-size // page_size) * page_size


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
