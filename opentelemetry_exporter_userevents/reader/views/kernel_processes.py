# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Which processes the kernel view has listed, each known by (pid, start time).

A pid is reused once its process is gone, so a process is its pid and its start time
(``/proc/<pid>/stat`` field 22, clock ticks after boot): a new process with an old pid is a
new key, listed in ``set_event_pid`` and watched from scratch. What is kept is a cache of
what was listed, at most :data:`MAX_PROCESSES`, the least recently seen forgotten first (in
constant time); a process is forgotten when its leader's ``sched_process_exit`` is read.
Forgetting a live one costs only a second listing at its next record: the kernel keeps a
listed thread in ``set_event_pid`` until it exits (``options/event-fork`` removes it then).

The kernel's pids (a record's ``common_pid``, ``set_event_pid``) are pids of the host's pid
namespace, and the reader looks them up in ``/proc``: :func:`host_pid_namespace_error`
refuses a ``/proc`` of another pid namespace. ``/proc`` is untrusted like the records: each
file is read through a bounded read, and a field that does not parse is a failed lookup.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import NamedTuple

from opentelemetry_exporter_userevents.reader.views.process_view import (
    STATUS_LIMIT,
    thread_group_of_status,
)

MAX_PROCESSES = 1024
"""Processes remembered as listed at most (least recently seen forgotten first): the cost of
more is a second ``/proc`` lookup and listing, never a process left unwatched."""
MAX_THREADS_LISTED = 65536
"""Threads of one process listed at most (``/proc/<pid>/task`` entries read)."""
STAT_LIMIT = 4096
"""Bytes of ``/proc/<pid>/stat`` read at most (one line; a comm is 16 bytes at most)."""
PROC_PID_INIT_INO = 0xEFFFFFFC
"""The inode the kernel gives the initial (host's) pid namespace (``PROC_PID_INIT_INO`` in
``include/linux/proc_ns.h``, fixed since Linux 3.8); other namespaces get inodes above it."""
INIT_PID_NS = "/proc/1/ns/pid"
"""The pid namespace of the init that the reader's ``/proc`` shows."""


class ProcessKey(NamedTuple):
    pid: int
    start: int
    """Field 22 of ``/proc/<pid>/stat``: when it started, in clock ticks after boot."""


UNKNOWN = ProcessKey(0, -1)
"""A thread whose process could not be looked up (gone): equal to no real process."""


def host_pid_namespace_error(path: str = INIT_PID_NS) -> str | None:
    """Why the kernel view cannot run with this ``/proc``; None when its init is the host's.

    The init the reader's ``/proc`` shows is in the host's pid namespace exactly when that
    ``/proc`` numbers processes as the kernel's records do (a container's own ``/proc``
    shows its own init, whatever namespace the reader itself is in)."""
    try:
        inode = os.stat(path).st_ino
    except OSError as error:
        return f"--kernel cannot tell the pid namespace of {path}: {error.strerror}"
    if inode != PROC_PID_INIT_INO:
        return (
            "--kernel needs the host's pid namespace (the kernel lists threads by their host "
            "pids): run the reader with the host's /proc (Kubernetes hostPID: true, docker "
            "run --pid=host)"
        )
    return None


def process_of(tid: int, proc: str = "/proc") -> ProcessKey | None:
    """The process of a thread, from ``/proc/<tid>/status`` (Tgid) and the start time of
    ``/proc/<tgid>/stat``; None if either is gone or does not parse."""
    text = _read(f"{proc}/{tid}/status", STATUS_LIMIT)
    group = thread_group_of_status(text) if text is not None else None
    if group is None:
        return None
    start = start_time(_read(f"{proc}/{group.tgid}/stat", STAT_LIMIT) or "")
    return ProcessKey(group.tgid, start) if start is not None else None


def start_time(stat: str) -> int | None:
    """Field 22 of a ``/proc/<pid>/stat`` line; the comm (field 2, any bytes but limited to
    16) is skipped to its last ``)``."""
    _, paren, rest = stat.rpartition(")")
    fields = rest.split()
    if not paren or len(fields) < 20 or not fields[19].isdigit() or not fields[19].isascii():
        return None
    return int(fields[19])


def threads_of(pid: int, proc: str = "/proc") -> list[int]:
    """Every thread of a process (at most :data:`MAX_THREADS_LISTED`), from
    ``/proc/<pid>/task``."""
    try:
        names = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return []
    return [int(name) for name in names[:MAX_THREADS_LISTED] if name.isdigit()]


def _read(path: str, limit: int) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


class ListedProcesses:
    """The processes listed so far, by pid: a key with another start time is not listed."""

    def __init__(self, max_processes: int = MAX_PROCESSES) -> None:
        self.max_processes = max_processes
        self.forgotten = 0
        """Processes forgotten to make room (the bound reached), not by their exit."""
        self._starts: OrderedDict[int, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._starts)

    def listed(self, key: ProcessKey) -> bool:
        """Whether this process (this pid and start time) is listed; it is seen now."""
        if self._starts.get(key.pid) != key.start:
            return False
        self._starts.move_to_end(key.pid)
        return True

    def add(self, key: ProcessKey) -> None:
        """Remember ``key`` as listed (an older process of the same pid is replaced)."""
        self._starts.pop(key.pid, None)
        if len(self._starts) >= self.max_processes:
            self._starts.popitem(last=False)
            self.forgotten += 1
        self._starts[key.pid] = key.start

    def exited(self, key: ProcessKey) -> None:
        """Its leader exited: forget it (only this process, not a later one of its pid)."""
        if self._starts.get(key.pid) == key.start:
            del self._starts[key.pid]
