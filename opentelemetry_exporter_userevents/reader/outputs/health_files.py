# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Where the readers on one ``--spool DIR`` keep their health files, each its own (issue 44).

Each reader writes ``DIR/health-reader-<16 hex>.json``, named after its spool namespace
(:mod:`.exporterhelper.spool_files`): two readers on one DIR (a DaemonSet's rolling update)
never write the same file, and ``status --spool DIR`` shows each. Whether a reader still
runs is told by its namespace's lock (a pid says nothing across pid namespaces: two pods'
readers may both be pid 1): held, it runs; free or gone (an exited reader removes an empty
namespace), it exited. A ``DIR/health.json`` of the version before is still read.

The files of exited readers are kept for ``status`` (their last counts), the newest
:data:`KEEP_EXITED` of them: a reader removes the older ones when it starts.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re

LEGACY = "health.json"
"""The one health file of the version before (every reader on DIR wrote it)."""
NAME = re.compile(r"^health-(reader-[0-9a-f]{16})\.json$")
KEEP_EXITED = 4
"""Health files of exited readers kept, the newest (by their time of writing)."""
MAX_SCANNED = 4096
"""Names of DIR looked at, at most."""

RUNNING = "running"
EXITED = "exited"
UNKNOWN = "unknown"


def health_file(namespace: str) -> str:
    """The health file of the reader whose spool namespace is ``namespace``."""
    return f"health-{namespace}.json"


def health_files(directory: str) -> list[str]:
    """The health files in ``directory``: each reader's, sorted, then the legacy one."""
    found: list[str] = []
    legacy = False
    try:
        with os.scandir(directory) as entries:
            for scanned, entry in enumerate(entries):
                if scanned >= MAX_SCANNED:
                    break
                if NAME.match(entry.name):
                    found.append(entry.name)
                elif entry.name == LEGACY:
                    legacy = True
    except OSError:
        return []
    return sorted(found) + ([LEGACY] if legacy else [])


def reader_state(directory: str, name: str) -> str:
    """Whether the reader that wrote health file ``name`` runs: its namespace's lock held
    (:data:`RUNNING`), free or its namespace removed (:data:`EXITED`); :data:`UNKNOWN` for
    the legacy file or a lock that cannot be read (no rights). The lock is only tried,
    shared and released at once, never made: a reader taking over finds it free again."""
    match = NAME.match(name)
    if match is None:
        return UNKNOWN
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(os.path.join(directory, match[1], "lock"), flags)
    except FileNotFoundError:
        return EXITED  # the namespace was emptied and removed
    except OSError:
        return UNKNOWN
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as error:
        return RUNNING if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else UNKNOWN
    finally:
        os.close(fd)  # the shared lock, if taken, goes with it
    return EXITED


def prune_exited(directory: str, own: str, keep: int = KEEP_EXITED) -> list[str]:
    """At a reader's start: the health files of exited readers but the newest ``keep``
    removed (never ``own``, nor a running reader's); the names removed."""
    exited: list[tuple[int, str]] = []
    for name in health_files(directory):
        if name in (own, LEGACY) or reader_state(directory, name) != EXITED:
            continue
        try:
            exited.append((os.lstat(os.path.join(directory, name)).st_mtime_ns, name))
        except OSError:
            continue
    exited.sort(reverse=True)
    removed = []
    for _written, name in exited[keep:]:
        try:
            os.unlink(os.path.join(directory, name))
            removed.append(name)
        except OSError:
            pass
    return removed
