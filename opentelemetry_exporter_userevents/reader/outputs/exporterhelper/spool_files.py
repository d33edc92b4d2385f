# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The spool's files (:mod:`.spool`): a segment's format, read within its bounds and written
durably, and the namespaces (one sub-directory per reader) opened and locked with
``flock``. Apart from the queue so that what touches the disk, and may stall, is in one
place; none of it takes the spool's lock."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import stat
import struct
import zlib
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
"""Segments held at most (the reader keeps each one's name and size in memory, in order);
past it, the oldest are dropped as when the bytes' bound is reached."""
MAX_NAMESPACES = 64
"""Other readers' namespaces looked at in one round (a DaemonSet's rolling updates leave
one or two)."""
MAX_SCANNED = 4096
"""Names of DIR looked at in one round, at most."""
PREFIX = "reader-"
LOCK = "lock"
LEGACY_LOCK = ".legacy.lock"
NAME = re.compile(r"^([0-9]{16,20})\.seg$")
TEMPORARY = re.compile(r"^\.([0-9]{16,20})\.seg\.tmp$")
NAMESPACE = re.compile(r"^reader-[0-9a-f]{16}$")
FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class SpoolError(OSError):
    """DIR cannot be used privately; the message says why."""


class Segment(NamedTuple):
    number: int
    kind: str
    records: int
    payload: bytes
    namespace: str = ""
    """The namespace (sub-directory) it was read from; ``""`` for DIR itself (legacy)."""
    name: str = ""


class Namespace:
    """One reader's sub-directory, whose lock this reader holds."""

    def __init__(self, name: str, fd: int, lock_fd: int, own: bool) -> None:
        self.name = name
        self.fd = fd
        self.lock_fd = lock_fd
        self.own = own
        self.live = 0
        """Its segments in the index."""
        self.next = 1
        """The number of its next segment (this reader's own namespace)."""
        self.retired = False


class Entry(NamedTuple):
    namespace: Namespace
    name: str
    number: int
    size: int
    kind: str | None
    """None until its header is read (a segment taken over)."""
    records: int


Key = tuple[str, str]


def new_namespace(directory_fd: int, directory: str) -> Namespace:
    """This reader's own sub-directory, created (0700) and locked."""
    while True:
        name = PREFIX + secrets.token_hex(8)
        try:
            os.mkdir(name, 0o700, dir_fd=directory_fd)
            break
        except FileExistsError:
            continue
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, dir_fd=directory_fd)
    lock_fd = lock_file(fd, LOCK)
    if lock_fd is None:  # not reached: a directory just made, this reader's
        os.close(fd)
        raise SpoolError(f"--spool {directory}: cannot lock {name}/{LOCK}")
    fsync_quietly(directory_fd)
    return Namespace(name, fd, lock_fd, own=True)


def legacy_namespace(directory_fd: int) -> Namespace | None:
    """DIR itself, locked with :data:`LEGACY_LOCK`, if it holds segments of the version
    before (found among the first :data:`MAX_SCANNED` names) and no other reader holds it."""
    with os.scandir(directory_fd) as entries:
        for scanned, entry in enumerate(entries):
            if scanned >= MAX_SCANNED:
                return None
            if NAME.match(entry.name) or TEMPORARY.match(entry.name):
                break
        else:
            return None  # none: no lock file is made
    lock_fd = lock_file(directory_fd, LEGACY_LOCK)
    if lock_fd is None:
        return None  # another reader of this version takes them
    return Namespace("", os.dup(directory_fd), lock_fd, own=False)


def namespace_names(directory_fd: int, known: set[str] | dict[str, Namespace]) -> list[str]:
    """Names of other readers' namespaces in DIR (at most :data:`MAX_NAMESPACES`, among the
    first :data:`MAX_SCANNED` names), not in ``known``."""
    names: list[str] = []
    try:
        with os.scandir(directory_fd) as entries:
            for scanned, entry in enumerate(entries):
                if scanned >= MAX_SCANNED or len(names) >= MAX_NAMESPACES:
                    break
                if NAMESPACE.match(entry.name) and entry.name not in known:
                    names.append(entry.name)
    except OSError:
        return []
    return names


def open_namespace(directory_fd: int, name: str) -> Namespace | None:
    """Another reader's namespace, locked by this one; None if its reader still runs, or it
    is not a directory of this user's."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=directory_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            os.close(fd)
            return None
        lock_fd = lock_file(fd, LOCK)
    except OSError:
        os.close(fd)
        return None
    if lock_fd is None:
        os.close(fd)
        return None  # its reader runs: it drains its own
    return Namespace(name, fd, lock_fd, own=False)


def retire_namespace(directory_fd: int, namespace: Namespace) -> None:
    """An emptied namespace removed, then its lock released."""
    if namespace.name:
        unlink_quietly(namespace.fd, LOCK)
        try:
            os.rmdir(namespace.name, dir_fd=directory_fd)
        except OSError:
            pass  # something else in it: left
    else:
        unlink_quietly(directory_fd, LEGACY_LOCK)
    os.close(namespace.fd)
    os.close(namespace.lock_fd)


def read_segment(entry: Entry) -> Segment | None:
    """The segment, if its header, length and checksum hold; read within its size."""
    try:
        fd = os.open(entry.name, READ, dir_fd=entry.namespace.fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not HEADER.size <= info.st_size <= MAX_SEGMENT:
            return None
        data = read_at_most(fd, info.st_size)
    except OSError:
        return None
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
    return Segment(entry.number, KINDS[code], records, payload, entry.namespace.name, entry.name)


def read_header(directory: int, name: str) -> tuple[str | None, int]:
    """The kind and records a segment's header says (checked; not its payload)."""
    try:
        fd = os.open(name, READ, dir_fd=directory)
    except OSError:
        return None, 0
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, 0
        data = read_at_most(fd, HEADER.size)
    except OSError:
        return None, 0
    finally:
        os.close(fd)
    if len(data) != HEADER.size:
        return None, 0
    magic, version, code, _reserved, records, _length, _crc = HEADER.unpack(data)
    if magic != MAGIC or version != VERSION or code not in KINDS:
        return None, 0
    return KINDS[code], records


def write_file(directory: int, name: str, data: bytes) -> None:
    """``data`` written whole to a new file ``name`` (0600) and ``fsync``-ed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, 0o600, dir_fd=directory)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def lock_file(directory: int, name: str) -> int | None:
    """``name`` in ``directory`` opened (made, 0600, if missing) and locked exclusively,
    without waiting; None if another process holds it."""
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=directory)  # fmt: skip
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def fsync_quietly(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass


def read_at_most(fd: int, size: int) -> bytes:
    chunks = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def unlink_quietly(directory: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except OSError:
        pass


def private_directory(directory: str) -> None:
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
