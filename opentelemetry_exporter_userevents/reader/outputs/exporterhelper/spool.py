# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A persistent queue on disk for OTLP requests the collector did not take (``--spool DIR``),
the reader's ``sending_queue`` with ``storage``: locked per reader, bounded, drained oldest
first, taken over from a reader that exited.

A request the output could not deliver (no answer, or 429/502/503/504, or a retryable gRPC
code, after its retries; or the request's deadline; or, at stop, what the output had not
delivered by ``--stop-timeout``: the requests in flight and the batches queued) is written
as one segment file, the encoded request as it would have been sent (before compression),
and re-sent, oldest first, from the output's thread once the collector takes a request
again. An answer that is not retried (a 400, gRPC ``INVALID_ARGUMENT``) is not spooled: the
collector would refuse it again.

**One namespace per reader, locked.** Two readers share DIR in every DaemonSet rolling
update (the new pod starts before the old one has drained). Each reader writes only into a
sub-directory of its own, ``DIR/reader-<16 hex digits>/``, whose ``lock`` file it holds
with ``flock(LOCK_EX)`` for as long as it runs. At start, and every :data:`ADOPT_SECONDS`
while it drains, a reader looks at the other sub-directories: one whose lock it can take
belongs to a reader that exited or was killed (the kernel frees the lock with the
process); it takes that lock and so the segments, and re-sends them before its own (the
older backlog). A namespace whose lock is held is left alone: its reader drains it. So two
readers never write, read or delete the same file, and a segment is deleted by the one
reader that sent it: nothing the first reader had sent and deleted is sent again by the
second, nothing either wrote is lost. An emptied namespace is removed (a reader's own at
its close). Segments of the version before (``DIR/NNNNNNNNNNNNNNNN.seg``, no lock) are taken
over at start under ``DIR/.legacy.lock``.

**Files.** DIR and each namespace are 0700 (an existing DIR must be a directory owned by the
reader's user, not a symlink, and is made 0700; a namespace not owned by it is left alone);
each segment ``N.seg`` (``N`` 16 to 20 decimal digits, at most 2**64: never reused, each
reader writes in a namespace of its own) is 0600, a :data:`HEADER` (magic, version, kind,
records, payload length, CRC-32 of the payload) before the payload. It is written to a
temporary name, ``fsync``-ed, renamed, the namespace ``fsync``-ed: whole under its name or
not there. One re-sent and taken is deleted and the namespace ``fsync``-ed before the next
is read: a power cut does not bring it back. So a SIGKILL loses no spooled segment, only
what was in memory (queued, or in flight); a power cut, also the segment being written.

**No disk I/O under the lock.** The spool's lock guards its counts and its index (the
segments in order, in memory); it is never held across a read, a write, an ``fsync``, a
rename or a delete. So the read loop's progress line, the health snapshot and the stop
(:meth:`Spool.totals`, :meth:`Spool.counts`) return at once while a disk stalls in
``fsync``; a put still under way when the stop gives up on it (:meth:`Spool.abandon`) is
not renamed into place, its records counted as not delivered, not as spooled.

**Bounds.** The segments' bytes stay within ``max_bytes`` (``--spool-max-mb``) and
:data:`MAX_SEGMENTS`: the oldest are deleted to make room, counted as dropped (``spool
full``), as is a request larger than the bound alone. A full disk (``ENOSPC``, ``EDQUOT``)
deletes the oldest one at a time, counted the same way, until the new one fits; only with
none left is it counted as not written. The oldest is the head of the index (no scan); a
namespace is listed once, when taken over (at most twice :data:`MAX_SEGMENTS` names kept).
A segment is read only after its size is checked (:data:`MAX_SEGMENT` at most, the
header's length equal to the rest) and its checksum matched; one that fails (a torn write,
a hostile file: the spool is read back as root) is deleted, counted as damaged. Names that
are not segments are left alone (a killed writer's temporary files are deleted).

**At least once.** A segment is deleted only after the collector took it: a request taken
whose answer was lost (a connection cut, a reader killed before the delete; one in flight
or re-sent at the stop, kept, that the collector then took) is sent again. Records are
not re-sent in order with live ones: a new batch goes first, then the spool drains.
"""

from __future__ import annotations

import os
import stat
import threading
import time
import zlib
from collections import Counter, deque

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery_ledger import (
    SpoolCounts,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool_files import (
    FULL,
    HEADER,
    KIND_CODES,
    MAGIC,
    MAX_SEGMENT,
    MAX_SEGMENTS,
    NAME,
    TEMPORARY,
    VERSION,
    Entry,
    Key,
    Namespace,
    Segment,
    SpoolError,
    fsync_quietly,
    legacy_namespace,
    namespace_names,
    new_namespace,
    open_namespace,
    private_directory,
    read_header,
    read_segment,
    retire_namespace,
    unlink_quietly,
    write_file,
)

__all__ = ["HEADER", "MAGIC", "MAX_SEGMENT", "MAX_SEGMENTS", "Segment", "Spool", "SpoolError"]

ADOPT_SECONDS = 5.0
"""While draining, how often a reader looks for namespaces whose reader exited."""


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
        """Records dropped oldest first (spool or disk full), or too large for it, by kind."""
        self.damaged = 0
        """Segments deleted unread: a header, length or checksum that did not match."""
        self.unwritten: Counter[str] = Counter()
        """Records whose segment could not be written (disk full, none to drop; I/O error)."""
        self.taken_over = 0
        """Segments found in namespaces of readers that exited (at start or since)."""
        self.taken_over_items = self.damaged_items = 0
        """Their records; records of segments in the index found damaged (the ledger's)."""
        self._live: dict[Key, Entry] = {}
        self._order: deque[Key] = deque()
        self._held: Key | None = None
        """The segment :meth:`oldest` returned, being re-sent: never dropped meanwhile."""
        self._bytes = 0
        self._left: Counter[str] = Counter()  # records in the index, by kind
        self._abandoned = False
        self._only: int | None = None  # from the stop on: the one thread that puts, removes
        self._namespaces: dict[str, Namespace] = {}
        self._next_adopt = 0.0
        private_directory(directory)
        self._fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._own = new_namespace(self._fd, directory)
        self._namespaces[self._own.name] = self._own
        self._take_over_legacy()
        self.adopt()
        victims = self._victims(0)
        self._drop(victims)

    # -- namespaces ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        """This reader's namespace (``reader-<16 hex>``): its health file is named after it."""
        return self._own.name

    def _take_over_legacy(self) -> None:
        """Segments of the version before, in DIR itself, under DIR's legacy lock."""
        namespace = legacy_namespace(self._fd)
        if namespace is not None:
            self._adopted(namespace, self._list(namespace))

    def adopt(self) -> int:
        """Take over the namespaces of readers that exited (their lock free): their segments
        go first in the index. How many segments were taken over (never raises)."""
        self._next_adopt = time.monotonic() + ADOPT_SECONDS
        taken = 0
        for name in namespace_names(self._fd, self._namespaces):
            namespace = open_namespace(self._fd, name)
            if namespace is None:
                continue
            found = self._list(namespace)
            taken += len(found)
            self._adopted(namespace, found)
        return taken

    def _list(self, namespace: Namespace) -> list[tuple[int, str, int, str, int]]:
        """A namespace's segments (number, name, size, kind, records), oldest first; damaged
        ones and a killed writer's temporary files deleted; at most :data:`MAX_SEGMENTS`,
        the oldest past that dropped. Each header is read (once, at takeover)."""
        found: list[tuple[int, str, int]] = []
        damaged: list[str] = []
        try:
            with os.scandir(namespace.fd) as entries:
                for entry in entries:
                    name = entry.name
                    if TEMPORARY.match(name):
                        unlink_quietly(namespace.fd, name)  # a killed writer's, never renamed
                        continue
                    match = NAME.match(name)
                    if match is None:
                        continue
                    try:
                        info = os.lstat(name, dir_fd=namespace.fd)
                    except OSError:
                        continue
                    if not stat.S_ISREG(info.st_mode) or not (
                        HEADER.size <= info.st_size <= MAX_SEGMENT
                    ):
                        damaged.append(name)
                        continue
                    found.append((int(match[1]), name, info.st_size))
                    if len(found) >= 2 * MAX_SEGMENTS:
                        found.sort()
                        self._drop_listed(namespace, found[:MAX_SEGMENTS])
                        del found[:MAX_SEGMENTS]
        except OSError:
            pass
        found.sort()
        kept: list[tuple[int, str, int, str, int]] = []
        for number, name, size in found:
            kind, records = read_header(namespace.fd, name)  # its records, counted as left
            if kind is None:
                damaged.append(name)
            else:
                kept.append((number, name, size, kind, records))
        for name in damaged:
            unlink_quietly(namespace.fd, name)
        with self._lock:
            self.damaged += len(damaged)
        return kept

    def _drop_listed(self, namespace: Namespace, listed: list[tuple[int, str, int]]) -> None:
        for _number, name, _size in listed:
            kind, records = read_header(namespace.fd, name)
            unlink_quietly(namespace.fd, name)
            with self._lock:
                if kind is None:
                    self.damaged += 1
                else:
                    self.dropped[kind] += records
                    self.taken_over_items += records

    def _adopted(self, namespace: Namespace, found: list[tuple[int, str, int, str, int]]) -> None:
        """``found`` put first in the index (older than this reader's own), then the bounds
        applied."""
        keys = [(namespace.name, name) for _number, name, _size, _kind, _records in found]
        with self._lock:
            self._namespaces[namespace.name] = namespace
            for (number, name, size, kind, records), key in zip(found, keys, strict=True):
                self._live[key] = Entry(namespace, name, number, size, kind, records)
                self._bytes += size
                self._left[kind] += records
            namespace.live += len(found)
            self.taken_over += len(found)
            self.taken_over_items += sum(records for *_found, records in found)
            self._order.extendleft(reversed(keys))
            retire = not found and self._retiring(namespace)
            victims = self._victims(0)
        self._drop(victims)
        if retire:
            self._retire(namespace)

    def _retiring(self, namespace: Namespace) -> bool:
        """Whether an emptied namespace taken over is to be removed (with the lock held)."""
        if namespace.own or namespace.live or namespace.retired:
            return False
        namespace.retired = True
        self._namespaces.pop(namespace.name, None)
        return True

    def _retire(self, namespace: Namespace) -> None:
        retire_namespace(self._fd, namespace)

    # -- the queue ----------------------------------------------------------------------

    def put(self, kind: str, records: int, payload: bytes) -> bool:
        """Write one request; False if it cannot be held (counted as dropped or not written;
        after :meth:`abandon`, not counted: the stop counts it)."""
        size = HEADER.size + len(payload)
        own = self._own
        with self._lock:
            if size > self.max_bytes or size > MAX_SEGMENT:
                self.dropped[kind] += records
                return False
            if self._abandoned or not self._admits():
                return False
            victims = self._victims(size)
            number = own.next
            own.next += 1
            self._bytes += size  # room held for it while it is written
        self._drop(victims)
        header = HEADER.pack(
            MAGIC, VERSION, KIND_CODES[kind], 0, records, len(payload), zlib.crc32(payload)
        )
        name = f"{number:016d}.seg"
        temporary = f".{name}.tmp"
        written = False
        try:
            while True:
                try:
                    write_file(own.fd, temporary, header + payload)
                    break
                except OSError as error:
                    unlink_quietly(own.fd, temporary)
                    if error.errno not in FULL:
                        raise
                    with self._lock:  # the disk is full: the oldest go first
                        victims = self._victims(size, one=True)
                    if not victims:
                        raise
                    self._drop(victims)
            with self._lock:
                abandoned = self._abandoned or not self._admits()
            if abandoned:  # the stop gave up on it: not put in place, counted by the stop
                unlink_quietly(own.fd, temporary)
                with self._lock:
                    self._bytes -= size
                return False
            os.rename(temporary, name, src_dir_fd=own.fd, dst_dir_fd=own.fd)
            written = True
            fsync_quietly(own.fd)
        except OSError:
            if not written:
                unlink_quietly(own.fd, temporary)
                with self._lock:
                    self._bytes -= size
                    self.unwritten[kind] += records
                return False
        key = (own.name, name)
        with self._lock:
            self._live[key] = Entry(own, name, number, size, kind, records)
            self._order.append(key)
            own.live += 1
            self._left[kind] += records
            self.spooled[kind] += records
        return True

    def oldest(self) -> Segment | None:
        """The oldest whole segment (damaged ones before it deleted and counted), or None;
        namespaces of readers that exited are looked for every :data:`ADOPT_SECONDS`."""
        if time.monotonic() >= self._next_adopt:
            self.adopt()
        while True:
            with self._lock:
                key = self._head()
                if key is None:
                    self._held = None
                    return None
                entry = self._live[key]
                self._held = key
            segment = read_segment(entry)
            if segment is not None:
                return segment
            with self._lock:
                if self._live.pop(key, None) is None:
                    continue
                self._bytes -= entry.size
                entry.namespace.live -= 1
                self._forget_records(entry)
                self.damaged += 1
                self.damaged_items += entry.records if entry.kind is not None else 0
                self._held = None
                retire = self._retiring(entry.namespace)
            unlink_quietly(entry.namespace.fd, entry.name)
            if retire:
                self._retire(entry.namespace)

    def remove(self, segment: Segment, resent: int) -> None:
        """``segment`` was taken (``resent`` of its records): deleted, durably (its
        namespace ``fsync``-ed: a power cut does not bring it back to be sent twice)."""
        key = (segment.namespace, segment.name or f"{segment.number:016d}.seg")
        with self._lock:
            if not self._admits():
                return  # the stop has counted it as left: it stays, to be sent again
            entry = self._live.pop(key, None)
            if self._held == key:
                self._held = None
            if entry is not None:
                self._bytes -= entry.size
                entry.namespace.live -= 1
                self._forget_records(entry)
            self.resent[segment.kind] += resent
            retire = entry is not None and self._retiring(entry.namespace)
        if entry is None:
            return
        unlink_quietly(entry.namespace.fd, entry.name)
        if retire:
            self._retire(entry.namespace)  # the namespace removed: as durable
        else:
            fsync_quietly(entry.namespace.fd)

    def hold_for(self, thread: int) -> None:
        """At the stop: only ``thread`` (an ident; 0: none) puts or removes from now on. The
        output's thread, still under way, then changes no count the stop has taken: its
        puts return False (the stop spools what was in flight), its removals are left
        undone (the segment is sent again: at least once)."""
        with self._lock:
            self._only = thread

    def _admits(self) -> bool:
        return self._only is None or self._only == threading.get_ident()

    def abandon(self) -> None:
        """The stop has given up waiting: puts still under way are not put in place (and
        return False), nor are later ones."""
        with self._lock:
            self._abandoned = True

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

    def ledger_counts(self) -> SpoolCounts:
        """The spool's part of the delivery ledger (:mod:`.delivery_ledger`), one snapshot."""
        with self._lock:
            dropped, unwritten = sum(self.dropped.values()), sum(self.unwritten.values())
            left = sum(self._left.values())
            return SpoolCounts(self.taken_over_items, dropped, unwritten, self.damaged_items, left)

    def counts(self) -> tuple[int, int]:
        """Segments and bytes in the spool (those being written included in the bytes)."""
        with self._lock:
            return len(self._live), self._bytes

    def close(self) -> None:
        """Locks released (this reader's namespace removed if empty): another reader may
        take over what is left."""
        with self._lock:
            namespaces = list(self._namespaces.values())
            self._namespaces.clear()
            own_empty = self._own.live == 0
        for namespace in namespaces:
            if namespace is self._own and own_empty:
                self._retire(namespace)
                continue
            os.close(namespace.fd)
            os.close(namespace.lock_fd)
        os.close(self._fd)

    def _forget_records(self, entry: Entry) -> None:
        """``entry`` left the index: its records no longer left in the spool (lock held)."""
        if entry.kind is not None:
            self._left[entry.kind] -= entry.records

    def left(self) -> Counter[str]:
        """Records left in the spool, by kind (those of segments being written not yet)."""
        with self._lock:
            return +self._left

    def _head(self) -> Key | None:
        """The oldest key in the index (with the lock held); keys no longer live skipped."""
        order, live = self._order, self._live
        while order and order[0] not in live:
            order.popleft()
        return order[0] if order else None

    def _victims(self, size: int, one: bool = False) -> list[Entry]:
        """With the lock held: the oldest entries taken out of the index to make room for
        ``size`` bytes (or ``one`` of them: the disk is full), never the one being
        re-sent; deleted and counted by :meth:`_drop`, outside the lock."""
        victims: list[Entry] = []
        held: list[Key] = []
        order, live = self._order, self._live
        while order and (
            (one and not victims)
            or self._bytes + size > self.max_bytes
            or len(live) + (size > 0) > MAX_SEGMENTS
        ):
            key = order.popleft()
            entry = live.get(key)
            if entry is None:
                continue
            if key == self._held:
                held.append(key)
                continue
            del live[key]
            self._bytes -= entry.size
            entry.namespace.live -= 1
            self._forget_records(entry)
            victims.append(entry)
        order.extendleft(held)
        return victims

    def _drop(self, victims: list[Entry]) -> None:
        """Entries taken out of the index: deleted and counted as dropped (outside the
        lock: a header of a segment taken over is read for its records)."""
        for entry in victims:
            kind, records = entry.kind, entry.records
            if kind is None:
                kind, records = read_header(entry.namespace.fd, entry.name)
            unlink_quietly(entry.namespace.fd, entry.name)
            with self._lock:
                if kind is None:
                    self.damaged += 1
                else:
                    self.dropped[kind] += records
                retire = self._retiring(entry.namespace)
            if retire:
                self._retire(entry.namespace)
