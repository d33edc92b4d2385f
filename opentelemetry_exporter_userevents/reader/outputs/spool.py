# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A bounded queue on disk for OTLP requests the collector did not take (``--spool DIR``).

A request the output could not deliver (no answer, or 429/502/503/504, or a retryable gRPC
code, after its retries; or the request's deadline; or, at stop, what the output had not
delivered by ``--stop-timeout``: the requests in flight and the batches queued) is written
to DIR as one segment file, the encoded request as it would have been sent (before
compression), and re-sent, oldest first, from the
output's thread once the collector takes a request again; a reader started with the same
DIR resumes them. An answer that is not retried (a 400, gRPC ``INVALID_ARGUMENT``) is not
spooled: the collector would refuse it again.

**Files.** DIR is created 0700 (an existing one must be a directory owned by the reader's
user, not a symlink, and is made 0700); each segment ``NNNNNNNNNNNNNNNN.seg`` is 0600, with
a :data:`HEADER` (magic, version, kind, records, payload length, CRC-32 of the payload)
before the payload. It is written to a temporary name, ``fsync``-ed, renamed, and the
directory ``fsync``-ed: a segment either is whole under its name or is not there. So a
SIGKILL loses no spooled segment, only what was still in memory (queued for the output,
or the request in flight); a power cut, the same, plus at most the segment being written.

**Bounds.** The segments' bytes stay within ``max_bytes`` (``--spool-max-mb``): to make
room for a new segment the oldest are deleted, their records counted as dropped (``spool
full``); a request larger than the bound alone is dropped the same way; so are the oldest
past :data:`MAX_SEGMENTS` segments (a directory of many tiny files is read a name at a
time, never listed whole). A segment is read
only after its size is checked (:data:`MAX_SEGMENT` at most, the header's length equal to
the rest of the file) and its checksum matched; a segment that fails any check (a torn
write, a hostile file: the spool is read back as root) is deleted and counted as damaged,
never read past its bound. Names that are not segments are left alone (temporary files of
a killed writer are deleted).

**At least once.** A segment is deleted only after the collector took it; a request that
was taken but whose answer was lost (the connection cut after the collector read it, the
reader killed between the answer and the delete; a request in flight at the stop
deadline, spooled, that the collector then took before the process exited) is sent again:
the collector may see those records twice. Records are not re-sent in order with live
ones: a new batch goes first, then the spool drains.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import threading
import zlib
from collections import Counter
from typing import NamedTuple

MAGIC = b"OTUSPOOL"
VERSION = 1
HEADER = struct.Struct("<8sBBHIII")
"""magic, version, kind, reserved (0), records, payload length, CRC-32 of the payload."""
KINDS = {1: "spans", 2: "logs", 3: "metrics"}
KIND_CODES = {kind: code for code, kind in KINDS.items()}
MAX_SEGMENT = 64 * 1024 * 1024 + HEADER.size
"""Bytes of a segment at most: the exporter's default ``max_request_size``, and its header."""
MAX_SEGMENTS = 65536
"""Segments held at most (the reader keeps each one's number and size in memory); past it,
the oldest are dropped as when the bytes' bound is reached."""
_NAME = re.compile(r"^([0-9]{16})\.seg$")
_TEMPORARY = re.compile(r"^\.([0-9]{16})\.seg\.tmp$")


class SpoolError(OSError):
    """DIR cannot be used privately; the message says why."""


class Segment(NamedTuple):
    number: int
    kind: str
    records: int
    payload: bytes


class Spool:
    """Segments of requests in ``directory``, at most ``max_bytes`` of them; thread-safe."""

    def __init__(self, directory: str, max_bytes: int) -> None:
        if max_bytes <= HEADER.size:
            raise ValueError(f"a spool of {max_bytes} bytes cannot hold a request")
        self.directory = directory
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self.spooled: Counter[str] = Counter()
        """Records written to the spool, by kind."""
        self.resent: Counter[str] = Counter()
        """Records re-sent from the spool and taken, by kind."""
        self.dropped: Counter[str] = Counter()
        """Records dropped oldest first (the spool was full), or too large for it, by kind."""
        self.damaged = 0
        """Segments deleted unread: a header, length or checksum that did not match."""
        self.unwritten: Counter[str] = Counter()
        """Records whose segment could not be written (the disk full, an I/O error)."""
        self._sizes: dict[int, int] = {}
        self._bytes = 0
        _private_directory(directory)
        self._fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for entry in os.scandir(directory):
            name = entry.name
            if _TEMPORARY.match(name):
                _unlink(directory, name)  # a killed writer's, never renamed: not a segment
                continue
            found = _NAME.match(name)
            if found is None:
                continue
            try:
                info = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or not HEADER.size <= info.st_size <= MAX_SEGMENT:
                self._damaged(int(found[1]), name)
                continue
            self._sizes[int(found[1])] = info.st_size
            self._bytes += info.st_size
            if len(self._sizes) >= 2 * MAX_SEGMENTS:
                self._make_room(0)  # at most twice the bound while reading the names
        self._next = max(self._sizes, default=0) + 1
        with self._lock:
            self._make_room(0)

    def put(self, kind: str, records: int, payload: bytes) -> bool:
        """Write one request; False if it cannot be held (counted as dropped)."""
        size = HEADER.size + len(payload)
        with self._lock:
            if size > self.max_bytes or size > MAX_SEGMENT:
                self.dropped[kind] += records
                return False
            self._make_room(size)
            number = self._next
            self._next += 1
            header = HEADER.pack(
                MAGIC, VERSION, KIND_CODES[kind], 0, records, len(payload), zlib.crc32(payload)
            )
            name = f"{number:016d}.seg"
            temporary = f".{name}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(temporary, flags, 0o600, dir_fd=self._fd)
                try:
                    view = memoryview(header + payload)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.rename(temporary, name, src_dir_fd=self._fd, dst_dir_fd=self._fd)
                os.fsync(self._fd)
            except OSError:
                _unlink(self._fd, temporary)
                self.unwritten[kind] += records
                return False
            self._sizes[number] = size
            self._bytes += size
            self.spooled[kind] += records
            return True

    def oldest(self) -> Segment | None:
        """The oldest whole segment (damaged ones before it deleted and counted), or None."""
        with self._lock:
            while self._sizes:
                number = min(self._sizes)
                segment = self._read(number)
                if segment is not None:
                    return segment
                self._forget(number)
                self._damaged(number, f"{number:016d}.seg")
            return None

    def remove(self, segment: Segment, resent: int) -> None:
        """``segment`` was taken (``resent`` of its records): delete it."""
        with self._lock:
            if self._forget(segment.number):
                _unlink(self._fd, f"{segment.number:016d}.seg")
            self.resent[segment.kind] += resent

    def totals(self) -> tuple[Counter[str], Counter[str], Counter[str], Counter[str], int]:
        """Copies of ``spooled``, ``resent``, ``dropped``, ``unwritten`` and ``damaged``."""
        with self._lock:
            return (
                Counter(self.spooled),
                Counter(self.resent),
                Counter(self.dropped),
                Counter(self.unwritten),
                self.damaged,
            )

    def counts(self) -> tuple[int, int]:
        """Segments and bytes in the spool."""
        with self._lock:
            return len(self._sizes), self._bytes

    def close(self) -> None:
        os.close(self._fd)

    def _read(self, number: int) -> Segment | None:
        """The segment, if its header, length and checksum hold; read within its size."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(f"{number:016d}.seg", flags, dir_fd=self._fd)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or not HEADER.size <= info.st_size <= MAX_SEGMENT:
                return None
            data = _read_at_most(fd, info.st_size)
        finally:
            os.close(fd)
        if len(data) != info.st_size:
            return None
        magic, version, code, reserved, records, length, crc = HEADER.unpack_from(data)
        payload = data[HEADER.size :]
        if (
            magic != MAGIC
            or version != VERSION
            or code not in KINDS
            or reserved != 0
            or length != len(payload)
            or zlib.crc32(payload) != crc
        ):
            return None
        return Segment(number, KINDS[code], records, payload)

    def _make_room(self, size: int) -> None:
        while self._sizes and (
            self._bytes + size > self.max_bytes or len(self._sizes) + (size > 0) > MAX_SEGMENTS
        ):
            number = min(self._sizes)
            kind, records = self._header(number)
            self._forget(number)
            _unlink(self._fd, f"{number:016d}.seg")
            if kind is None:
                self.damaged += 1
            else:
                self.dropped[kind] += records

    def _header(self, number: int) -> tuple[str | None, int]:
        """The kind and records a segment's header says (checked; not its payload)."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(f"{number:016d}.seg", flags, dir_fd=self._fd)
        except OSError:
            return None, 0
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None, 0
            data = _read_at_most(fd, HEADER.size)
        finally:
            os.close(fd)
        if len(data) != HEADER.size:
            return None, 0
        magic, version, code, _reserved, records, _length, _crc = HEADER.unpack(data)
        if magic != MAGIC or version != VERSION or code not in KINDS:
            return None, 0
        return KINDS[code], records

    def _forget(self, number: int) -> bool:
        size = self._sizes.pop(number, None)
        if size is None:
            return False
        self._bytes -= size
        return True

    def _damaged(self, number: int, name: str) -> None:
        self.damaged += 1
        _unlink(getattr(self, "_fd", self.directory), name)


def _read_at_most(fd: int, size: int) -> bytes:
    chunks = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _unlink(directory: int | str, name: str) -> None:
    try:
        if isinstance(directory, int):
            os.unlink(name, dir_fd=directory)
        else:
            os.unlink(os.path.join(directory, name))
    except OSError:
        pass


def _private_directory(directory: str) -> None:
    """``directory`` made (0700), or checked: a directory, not a symlink, the reader's own;
    then made 0700."""
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise SpoolError(f"--spool {directory}: not a directory (a symlink is not followed)")
    if info.st_uid != os.geteuid():
        raise SpoolError(f"--spool {directory}: owned by uid {info.st_uid}, not by this user")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(directory, 0o700, follow_symlinks=False)
