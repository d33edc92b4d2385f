# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The kernel view of a capture (``decode --kernel``): the scheduler's and syscalls'
records of a trace.dat or perf.data, fed to the live view's timeline.

The decoders come from the capture's own format files, untrusted like its records: a
format whose fields are not integers of 1 to 8 bytes, or whose id another format took, is
refused and named (its events are then missing). Times are mapped by a
:class:`.CaptureClock`. There is no tracefs instance and no ``/proc``: every thread the
capture shows of a writer's process (a thread that wrote our records, or one of its
process's when perf says) is watched from the moment every CPU's records have begun (the
latest first record of a CPU), at most :data:`.MAX_THREADS` at once as live; the records
of other threads are passed over. A thread's process is the
one the capture says (a perf sample's pid, at most :data:`MAX_THREADS` threads kept, the
least recently seen forgotten first); a trace.dat does not say, so there each thread is a
process of its own and a span's ``linux.thread.id`` naming another thread is refused.

A capture of ``record --capture --kernel`` says when each thread's watching began: the
reader lists a process's threads for its kernel view when it first reads of it, and then
writes a ``trace_marker`` record (:data:`WATCH_MARK` and the tids, :data:`MARK_TIDS` at
most, read whatever the record holds) into the same buffer. In such a capture a thread is
watched from its mark, or from its fork by a watched thread, never from the file's start:
the kernel kept nothing of it before.

A span is ``partial`` when the capture cannot show all of it: a group asked for with no
format or no record in the file, a CPU whose data is cut short, a span that starts before
every CPU's records have begun or before its thread was marked, or a loss the file records
during it. Each reason is said once, with the count of spans it made partial
(:meth:`CaptureKernelEvents.notes`).
"""

from __future__ import annotations

import struct
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence

from opentelemetry_exporter_userevents.abi.format import EventFormat, parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.abi.sched import (
    FTRACE_PRINT,
    FTRACE_SYSTEM,
    SCHED_SYSTEM,
    SYSCALLS_SYSTEM,
)
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.reader.views.kernel_capture_clock import CaptureClock
from opentelemetry_exporter_userevents.reader.views.kernel_decoders import (
    FORK,
    GONE,
    SWITCH,
    WAKEUP,
    Decoder,
    sched_decoder,
    syscall_event_decoder,
)
from opentelemetry_exporter_userevents.reader.views.kernel_events import GROUPS, KernelEvents
from opentelemetry_exporter_userevents.reader.views.kernel_processes import ProcessKey

MAX_CPUS = 4096
"""CPUs whose first kernel record's time is kept (a perf sample's CPU number is the file's
say: past this many, a CPU's start is not checked)."""
MAX_THREADS = 4096
"""Threads whose process (a perf sample's pid) is kept; a thread forgotten is a process of
its own until its next sample."""
MARK_TIDS = 1024
"""Thread ids read from one watch mark at most (the reader writes 256 a mark): a mark of
any length costs a bounded parse."""
WATCH_MARK = b"otel-userevents watch "
"""The start of a ``trace_marker`` record that lists the threads watched from its time."""
OWN_PROCESS = -2
"""The start of a :class:`.ProcessKey` for a thread whose process the capture does not
say: a process of its own (no other thread's figures can be borrowed through it)."""
_PID = struct.Struct("<i").unpack_from


class CaptureKernelEvents(KernelEvents):
    """Kernel events from a capture, for :class:`.KernelView`."""

    def __init__(
        self,
        formats: Iterable[tuple[str, str]],
        groups: tuple[str, ...] = GROUPS,
        layout: PageLayout | None = None,
    ) -> None:
        super().__init__(Tracefs(""), layout or PageLayout(), groups)  # never opened
        self.refused: list[str] = []
        """Format files not taken, with the reason."""
        self.group_of: dict[int, str] = {}
        self.seen: Counter[str] = Counter()
        """Records per group, counted by :meth:`census`."""
        self.first_stamps: dict[int, int] = {}
        """Each CPU's first kernel record (capture clock), noted by :meth:`census`."""
        self._since = 0
        self._missing: list[str] = []
        self._covered_from = 0
        self._partial: Counter[str] = Counter()
        self._process: OrderedDict[int, int] = OrderedDict()
        self._writers: set[int] = set()
        self._writer_pids: set[int] = set()
        self.relevant: set[int] | None = None
        """The threads whose kernel records are read: the writers of our records, and the
        other threads of their processes when the capture says (perf); None: every one.
        The others' records cost a look at their pids, nothing kept."""
        self.skipped = 0
        """Kernel records of no thread read."""
        self.marked = False
        """The capture marks when each thread's watching began (:data:`WATCH_MARK`)."""
        self._mark = (-1, 0)
        """The ``ftrace/print`` event's id and the offset of its text."""
        self._learn(formats)

    # --- formats --------------------------------------------------------------------

    def _learn(self, formats: Iterable[tuple[str, str]]) -> None:
        for system, text in formats:
            if system not in (SCHED_SYSTEM, SYSCALLS_SYSTEM, FTRACE_SYSTEM):
                continue
            try:
                fmt = parse_format(text)
            except ValueError as error:
                if system != FTRACE_SYSTEM:  # ftrace's own formats have other shapes
                    self.refused.append(f"{system}: {error}")
                continue
            if system == FTRACE_SYSTEM:
                self._learn_mark(fmt)
                continue
            decoder = self._decoder_of(system, fmt)
            if decoder is None:
                continue
            group = "syscalls" if system == SYSCALLS_SYSTEM else "sched"
            if decoder[0] in (FORK, GONE):
                group = "life"
            elif group not in self.groups:
                continue
            if fmt.id in self._decoders:
                self.refused.append(f"{system}/{fmt.name}: id {fmt.id} is another event's")
                continue
            self._decoders[fmt.id] = decoder
            self.group_of[fmt.id] = group

    def _learn_mark(self, fmt: EventFormat) -> None:
        if fmt.name != FTRACE_PRINT:
            return
        try:
            self._mark = (fmt.id, fmt.field("buf").offset)
        except KeyError:
            self.refused.append(f"{FTRACE_SYSTEM}/{fmt.name}: no field buf")

    def _decoder_of(self, system: str, fmt: EventFormat) -> Decoder | None:
        if system == SYSCALLS_SYSTEM:
            return syscall_event_decoder(fmt.name)
        try:
            return sched_decoder(fmt)
        except (KeyError, ValueError) as error:  # no such field, or not an integer
            self.refused.append(f"{system}/{fmt.name}: {error}")
            return None

    def forget_ids(self, ids: Iterable[int]) -> None:
        """Not the kernel's: these ids are our tracepoints' (a file that gives both is
        damaged or hostile, and ours are read as ours)."""
        for event_id in ids:
            if event_id == self._mark[0]:
                self._mark = (-1, 0)
                self.refused.append(f"event id {event_id}: one of our tracepoints has it")
            if self._decoders.pop(event_id, None) is not None:
                self.refused.append(f"event id {event_id}: one of our tracepoints has it")
                self.group_of.pop(event_id, None)

    def is_kernel(self, record: memoryview) -> bool:
        if len(record) < 8:
            return False
        event_id = record[0] | (record[1] << 8)
        return event_id in self._decoders or event_id == self._mark[0]

    def census(self, stamp: int, cpu: int, record: memoryview, pid: int = -1) -> None:
        """Count one kernel record by group, note its CPU's first and its thread's process
        (a first pass over the file, in any order)."""
        group = self.group_of.get(record[0] | (record[1] << 8))
        if group is None:  # a trace_marker record: is it a watch mark?
            self.marked = self.marked or self._marked_tids(record) is not None
            return
        self.seen[group] += 1
        firsts = self.first_stamps
        first = firsts.get(cpu)
        if first is None and len(firsts) < MAX_CPUS or first is not None and stamp < first:
            firsts[cpu] = stamp
        tid = _PID(record, 4)[0]
        if pid > 0 and tid > 0:
            self._note_process(tid, pid)

    def note_writer(self, tid: int, pid: int) -> None:
        """A record of ours (a first pass): the threads of its writer's process are the
        ones whose kernel records are read (at most :data:`MAX_THREADS` writers)."""
        if tid > 0 and len(self._writers) < MAX_THREADS:
            self._writers.add(tid)
        if pid > 0 and len(self._writer_pids) < MAX_THREADS:
            self._writer_pids.add(pid)

    # --- what the capture covers ----------------------------------------------------

    def start(self) -> None:
        """Nothing to open: a capture's events are fed (:meth:`take`)."""

    def close(self) -> None:
        """Nothing to remove."""

    def cover(
        self,
        clock: CaptureClock,
        missing_cpus: Sequence[str],
        losses: Iterable[tuple[int, int]],
    ) -> None:
        """What the file holds, after a first pass (:meth:`census`): the clock, the CPUs
        cut short and the losses (capture clock). The kernel's records cover the time
        since every CPU's first."""
        self._offset = offset = clock.offset_ns
        self._covered_from = max(self.first_stamps.values(), default=offset) - offset
        self._since = self._covered_from
        self.losses = [(start - offset, end - offset) for start, end in losses]
        self._missing = [f"no {group} events in the capture" for group in self.groups
                         if not self.seen[group]]  # fmt: skip
        writers = self._writer_pids
        self.relevant = self._writers | {t for t, p in self._process.items() if p in writers}
        self._missing += [f"{cpu}'s data is cut short" for cpu in missing_cpus]

    def lost_within(self, start: int, end: int, tid: int = 0) -> bool:
        reasons = list(self._missing)
        if start < self._covered_from:
            reasons.append("started before every CPU's records had begun")
        elif self.marked and start < self.timeline.watched_since(tid, start):
            reasons.append("started before its thread was watched (listed for the kernel view)")
        if super().lost_within(start, end):
            reasons.append("events lost meanwhile (the capture records the loss)")
        self._partial.update(reasons)
        return bool(reasons)

    def notes(self) -> list[str]:
        """Why spans are partial, once each: '<n> spans partial: <reason>'; and how many
        records of other threads were passed over."""
        notes = [f"{count} spans partial: {reason}" for reason, count in self._partial.items()]
        if self.skipped:
            notes.append(f"{self.skipped} records of threads of no writer passed over")
        return notes

    # --- feeding --------------------------------------------------------------------

    def take(self, events: Sequence[tuple[int, int, memoryview, int]]) -> int:
        """Feed (stamp, cpu, record, pid) kernel records, in time order: each thread they
        name is watched first, and its process noted when the capture says it."""
        self.reads += 1
        timeline = self.timeline
        if events:
            timeline.next_read(events[-1][0] - self._offset)
        decoders = self._decoders
        relevant = self.relevant
        marked, mark = self.marked, self._mark[0]
        kept: list[tuple[int, memoryview]] = []
        count = 0
        for stamp, _cpu, record, pid in events:
            event_id = record[0] | (record[1] << 8)
            decoder = decoders.get(event_id)
            if event_id == mark:
                count += self.feed(kept)  # the events before it, then the threads it marks
                kept = []
                if self._watch_marked(stamp, record):
                    self.stats.records += 1
                else:
                    self.stats.undecodable += 1  # another trace_marker record: not read
                continue
            if decoder is None or len(record) < decoder[1]:
                kept.append((stamp, record))  # counted by feed
                continue
            tid = _PID(record, 4)[0]
            named = [tid]
            kind = decoder[0]
            if kind == SWITCH:  # prev_pid and next_pid
                values = decoder[2](record)
                named += (values[0], values[2])
            elif kind == WAKEUP:  # the woken pid
                named.append(decoder[2](record)[0])
            if relevant is not None:
                named = [thread for thread in named if thread in relevant]
                if not named:
                    self.skipped += 1
                    continue
            if pid > 0 and tid > 0:
                self._note_process(tid, pid)
            kept.append((stamp, record))
            if kind == GONE or marked:  # marked: watched from its mark or its fork
                continue
            for thread in named:
                if thread > 0 and not timeline.watched(thread):
                    timeline.watch(thread, self._since)
        return count + self.feed(kept)

    def _marked_tids(self, record: memoryview) -> list[int] | None:
        """The thread ids of a watch mark (at most :data:`MARK_TIDS`); None: not one."""
        at = self._mark[1] + len(WATCH_MARK)
        if record[at - len(WATCH_MARK) : at] != WATCH_MARK:
            return None
        text = bytes(record[at : at + 12 * MARK_TIDS]).split(b"\0", 1)[0]
        words = text.split(maxsplit=MARK_TIDS)
        return [int(word) for word in words[:MARK_TIDS] if word.isdigit() and len(word) < 11]

    def _watch_marked(self, stamp: int, record: memoryview) -> bool:
        """A watch mark: its threads are watched from its time (the kernel kept nothing of
        them before); a thread already watched and alive is the same thread. False: the
        record is not a watch mark."""
        tids = self._marked_tids(record)
        if tids is None:
            return False
        since, relevant = stamp - self._offset, self.relevant
        for tid in tids:
            if tid > 0 and (relevant is None or tid in relevant):
                self.timeline.watch(tid, since)
        return True

    def _note_process(self, tid: int, pid: int) -> None:
        known = self._process
        if known.get(tid) == pid:
            known.move_to_end(tid)
            return
        known.pop(tid, None)
        if len(known) >= MAX_THREADS:
            known.popitem(last=False)
        known[tid] = pid

    def process_of(self, tid: int) -> ProcessKey | None:
        """The process the capture says ``tid`` ran in, else a process of its own; None
        if the thread is not watched."""
        if not self.timeline.watched(tid):
            return None
        pid = self._process.get(tid)
        return ProcessKey(pid, 0) if pid is not None else ProcessKey(tid, OWN_PROCESS)
