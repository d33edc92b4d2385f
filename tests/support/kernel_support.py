# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Helpers for kernel tests: child processes, polling, perf attach, the trace text."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import struct
import time
import traceback
from collections.abc import Callable
from typing import Any


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds (event deletion is async)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def in_child(function: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Run ``function`` in a forked child and return its JSON result (or re-raise)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            payload = {"result": function()}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            payload = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
        os.write(write_end, json.dumps(payload).encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    with os.fdopen(read_end, "rb") as pipe:
        while chunk := pipe.read(65536):
            chunks.append(chunk)
    os.waitpid(pid, 0)
    payload = json.loads(b"".join(chunks) or b'{"error": "child died"}')
    if "error" in payload:
        raise AssertionError(f"in child: {payload['error']}")
    return payload["result"]


def drop_privileges(uid: int = 65534, gid: int = 65534, groups: tuple[int, ...] = ()) -> None:
    os.setgroups(list(groups))
    os.setgid(gid)
    os.setuid(uid)


_CLONE_NEWNS = 0x00020000
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18
_MNT_DETACH = 2


def unmount_in_a_private_namespace(path: str) -> None:
    """In this process only (a child, with in_child): move to a mount namespace of its own
    and lazily unmount ``path``, as an administrator unmounting tracefs would. Files open
    below ``path`` stay open."""
    libc = ctypes.CDLL(None, use_errno=True)
    for call in (
        lambda: libc.unshare(_CLONE_NEWNS),
        lambda: libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None),
        lambda: libc.umount2(path.encode(), _MNT_DETACH),
    ):
        if call() != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))


def mount_points() -> set[tuple[str, str]]:
    """(mount point, file system type) of every mount this process sees."""
    with open("/proc/self/mounts", encoding="utf-8") as f:
        return {
            (fields[1], fields[2]) for fields in (line.split() for line in f) if len(fields) > 2
        }


def unmount(path: str) -> None:
    """Lazily unmount ``path`` (in this mount namespace)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(path.encode(), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)


def unmapped_buffer(size: int) -> ctypes.Array:
    """A buffer object whose memory is not mapped: the kernel faults reading it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]  # fmt: skip
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    length = max(size, mmap.PAGESIZE)
    address = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    libc.munmap(address, length)
    return (ctypes.c_char * size).from_address(address)


def raw_writev(fd: int, iovecs: int, count: int) -> int:
    """writev(2) with an iovec array at any address, which os.writev cannot pass."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.writev.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    result = libc.writev(fd, iovecs, count)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


# perf_event_open(2), from include/uapi/linux/perf_event.h
_SYS_PERF_EVENT_OPEN = 298  # x86_64
PERF_TYPE_TRACEPOINT = 2
PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_CPU, PERF_SAMPLE_RAW = 0x2, 0x4, 0x80, 0x400
PERF_RECORD_SAMPLE = 9
PERF_FLAG_FD_CLOEXEC = 8


class PerfTracepoint:
    """A perf_event_open attach to one tracepoint, with an mmap ring per CPU.

    By default it records every task on every CPU (root only); ``this_task=True`` records
    only the calling thread, as the kernel selftest does.
    """

    PAGES = 1 + 8

    def __init__(self, tracepoint_id: int, this_task: bool = False) -> None:
        attr = bytearray(136)
        sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW
        struct.pack_into(
            "<IIQQQ", attr, 0, PERF_TYPE_TRACEPOINT, 136, tracepoint_id, 1, sample_type
        )
        struct.pack_into("<I", attr, 48, 1)  # wakeup_events
        libc = ctypes.CDLL(None, use_errno=True)
        buffer = (ctypes.c_char * len(attr)).from_buffer(attr)
        targets = [(0, -1)] if this_task else [(-1, cpu) for cpu in range(os.cpu_count() or 1)]
        self.fds: list[int] = []
        self.rings: list[mmap.mmap] = []
        try:
            for pid, cpu in targets:
                fd = libc.syscall(_SYS_PERF_EVENT_OPEN, buffer, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC)
                if fd < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"perf_event_open: {os.strerror(err)}")
                self.fds.append(fd)
                self.rings.append(mmap.mmap(fd, self.PAGES * mmap.PAGESIZE, mmap.MAP_SHARED,
                                            mmap.PROT_READ | mmap.PROT_WRITE))  # fmt: skip
        except BaseException:
            self.close()
            raise

    def samples(self) -> list[bytes]:
        """The raw data (a trace record) of every PERF_RECORD_SAMPLE so far, oldest first."""
        found = []
        for ring in self.rings:
            head, _, offset, size = struct.unpack_from("<QQQQ", ring, 1024)
            data = ring[offset : offset + size]
            position = 0
            while position < head:
                start = position % size
                header = bytes(data[(start + i) % size] for i in range(8))
                kind, _, length = struct.unpack("<IHH", header)
                record = bytes(data[(start + i) % size] for i in range(length))
                if kind == PERF_RECORD_SAMPLE:
                    (time_ns,) = struct.unpack_from("<Q", record, 16)
                    (raw_size,) = struct.unpack_from("<I", record, 32)
                    found.append((time_ns, record[36 : 36 + raw_size]))
                position += length
        return [raw for _, raw in sorted(found, key=lambda item: item[0])]

    def close(self) -> None:
        for ring in self.rings:
            ring.close()
        for fd in self.fds:
            os.close(fd)
        self.rings, self.fds = [], []


def write_with_index(fd: int, write_index: int, *parts: bytes | bytearray | memoryview) -> int:
    """One ``writev`` of ``[s32 write_index][parts...]`` with any index, valid or not, so
    tests can see what the kernel does with it (the product writes through
    ``Registration.write`` only)."""
    return os.writev(fd, [struct.pack("<i", write_index), *parts])
