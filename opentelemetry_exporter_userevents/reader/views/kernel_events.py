# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The kernel's own events for the threads that write our records (``record --kernel``).

A tracefs instance of its own (``otel-userevents-kernel.<pid>.<start>.<n>.pidns<inode>``,
stale ones removed like the reader's), because its ``set_event_pid`` limits every event in
it to the listed threads: in the reader's instance it would also hide the first records of
a service not listed yet. The reader lists each process whose records it reads (every
thread of it, from ``/proc/<pid>/task``), known by pid and start time
(:mod:`.kernel_processes`, so a reused pid is listed again); ``options/event-fork`` makes
the kernel list the threads and children they start, and unlist them when they exit;
``sched_process_fork`` and ``sched_process_exit`` tell the timeline. Nothing is enabled
until a write of a non-empty list succeeded: an empty ``set_event_pid`` means every process.
The reader's ``/proc`` must number processes as the kernel does (the host's pid namespace).

The instance's ``trace_clock`` is ``tai``: CLOCK_TAI, which is CLOCK_REALTIME (the spans'
clock) plus a whole number of seconds (the kernel's TAI offset, 0 unless set), so a kernel
event's time maps onto the spans' exactly, stepped with the wall clock. At start the reader
checks the mapping: it writes :data:`CLOCK_CHECKS` ``trace_marker`` records, each between
two reads of CLOCK_REALTIME, and each record's mapped time must fall between its two reads
(:class:`ClockCheck` says by how much it did not, and how wide the windows were).

Records are untrusted like every other: each is decoded by its event's ``format`` (offsets
and sizes), a record too short for its fields is counted and skipped, and what a process
can make the reader keep is bounded (:mod:`.kernel_timeline`, :mod:`.kernel_processes`),
and decode: past its budget it is left out a while (:mod:`.kernel_pauses`).
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_right
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from opentelemetry_exporter_userevents.abi.ring_buffer import PageError, PageLayout, parse_page
from opentelemetry_exporter_userevents.abi.sched import (
    EVENT_FORK,
    FTRACE_PRINT,
    FTRACE_SYSTEM,
    SCHED_PROCESS_EXIT,
    SCHED_PROCESS_FORK,
    SCHED_SWITCH,
    SCHED_SYSTEM,
    SCHED_WAKEUP,
    SCHED_WAKEUP_NEW,
    SYSCALLS_SYSTEM,
)
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs, TracefsError
from opentelemetry_exporter_userevents.reader.live.cpu_pipes import CpuPipes
from opentelemetry_exporter_userevents.reader.live.tracefs_instance import TracefsInstance
from opentelemetry_exporter_userevents.reader.views import kernel_feed, kernel_groups
from opentelemetry_exporter_userevents.reader.views.kernel_decoders import (
    LIFE_EVENTS,
    SCHED_EVENTS,
    Decoder,
    sched_decoder,
    syscall_event_decoder,
)
from opentelemetry_exporter_userevents.reader.views.kernel_event_budget import EventAccount
from opentelemetry_exporter_userevents.reader.views.kernel_pauses import Pauses
from opentelemetry_exporter_userevents.reader.views.kernel_processes import (
    INIT_PID_NS,
    UNKNOWN,
    ListedProcesses,
    ProcessKey,
    host_pid_namespace_error,
    process_of,
    threads_of,
)
from opentelemetry_exporter_userevents.reader.views.kernel_timeline import KernelTimeline

KERNEL_INSTANCE_PREFIX = "otel-userevents-kernel."
GROUPS = kernel_groups.GROUPS  # the commands and the capture take them from here
parse_groups = kernel_groups.parse_groups
CLOCK = "tai"
CLOCK_CHECKS = 16
MAX_LOSS_TIMES = 4096
MAX_ANNOUNCED_THREADS = 4096
"""Threads listed from the announcements' thread that wait for the timeline's next read;
past this they are dropped and counted (``announced_dropped``): each is still listed in
``set_event_pid``, and the timeline watches it from its first record the main loop reads,
as for a writer that did not announce. The main loop takes them at every read, and
announcements are answered at most 32 prefixes a second (:mod:`.announcement_thread`), so
only a stalled main loop fills this."""
_PAGES_PER_READ = 1024
_BUFFER_KB = 4096
_MARK = "otel-userevents clock "
CLOCKSOURCE = "/sys/devices/system/clocksource/clocksource0/current_clocksource"


class KernelEventsError(TracefsError):
    """The kernel view cannot run here; the message says why (the CLI prints it)."""


@dataclass
class ClockCheck:
    """How trace-clock times mapped onto CLOCK_REALTIME at start."""

    offset_ns: int
    """CLOCK_TAI - CLOCK_REALTIME: subtracted from every kernel event's time."""
    checks: int = 0
    inside: int = 0
    """Markers whose mapped time fell between the two clock reads around their write."""
    worst_outside_ns: int = 0
    """The farthest a marker fell outside its window (0 when all fell inside)."""
    widest_window_ns: int = 0
    """The widest window: the resolution of the check."""
    clocksource: str | None = None
    """The kernel's clocksource (``jiffies`` or ``refined-jiffies``: every time is rounded
    to a tick, and the figures with it)."""


@dataclass
class KernelStats:
    records: int = 0
    undecodable: int = 0
    """Records of an unknown event, or too short for their fields."""
    lost: int = 0
    """Events the kernel lost (the instance's buffer overflowed)."""
    processes: int = 0
    """Processes listed (a pid reused by a new process counts again)."""
    processes_not_watched: int = 0
    """Writers gone before they could be listed, or whose listing the kernel refused."""
    announced_dropped: int = 0
    """Threads listed from announcements, dropped past :data:`MAX_ANNOUNCED_THREADS` waiting
    for the timeline (watched from their first record instead)."""


@dataclass
class KernelEvents:
    """Reads the kernel's events for our writers into a :class:`.KernelTimeline`."""

    tracefs: Tracefs
    layout: PageLayout
    groups: tuple[str, ...] = GROUPS
    buffer_size_kb: int = _BUFFER_KB
    timeline: KernelTimeline = field(default_factory=KernelTimeline)
    stats: KernelStats = field(default_factory=KernelStats)
    clock: ClockCheck | None = None
    losses: list[tuple[int, int]] = field(default_factory=list)
    """Intervals (span clock) in which events were lost, the last ones: from the read
    before a loss was counted to the read that counted it (the kernel does not say when)."""

    def __post_init__(self) -> None:
        self.tracefs_instance = TracefsInstance(self.tracefs, KERNEL_INSTANCE_PREFIX)
        self._decoders: dict[int, Decoder] = {}
        self.pipes = CpuPipes(self.tracefs, self.tracefs_instance.name, _PAGES_PER_READ)
        self.processes = ListedProcesses()
        self.reads = 0
        """Reads of the kernel's events so far (the kernel view's budgets are per read)."""
        self.init_pid_ns = INIT_PID_NS
        self._listing = threading.Lock()
        """Guards the listed processes, ``set_event_pid`` and enabling, which the main loop
        and the announcements' thread both change; the timeline is the main loop's alone."""
        self._announced: list[tuple[int, int, ProcessKey]] = []
        """Threads listed from the announcements' thread, for the timeline's next read (at
        most :data:`MAX_ANNOUNCED_THREADS`)."""
        self._enabled = False
        self._offset = 0
        self._last_read = time.time_ns()
        self._held: list[tuple[int, memoryview]] = []
        """Events after the moment the last read began, fed at the next."""
        self._last_count = 0
        self._marker = (-1, 0)
        """The ``ftrace/print`` event's id and the offset of its text."""
        self.pauses = Pauses(self._write_notrace)
        """Processes over their budget of events, left out of the instance a while."""
        self._left_out: dict[Hashable, EventAccount] = {}
        """The buckets of the processes left out now (as many as :attr:`pauses` has)."""

    # --- lifetime -------------------------------------------------------------------

    def start(self) -> None:
        """Create the instance, set its clock and check it, learn the events' formats."""
        refused = host_pid_namespace_error(self.init_pid_ns)
        if refused is not None:
            raise KernelEventsError(refused)
        instance = self.tracefs_instance
        instance.create()
        name = instance.name
        try:
            if CLOCK not in self.tracefs.trace_clocks(name):
                raise KernelEventsError(f"this kernel has no {CLOCK} trace clock")
            self.tracefs.set_trace_clock(name, CLOCK)
            self.tracefs.set_buffer_size_kb(name, self.buffer_size_kb)
            self.tracefs.set_option(name, EVENT_FORK, True)
            self.pipes.open()
            self._learn_formats()
            self.clock = self._check_clock()
            self.leave_out_over_budget()
        except (OSError, ValueError, KeyError) as error:  # no such event, or another format
            raise KernelEventsError(f"cannot trace the kernel's events: {error}") from error

    def close(self) -> None:
        """Remove the instance (which disables its events). Idempotent."""
        self.pipes.close()
        self.tracefs_instance.close()

    def _learn_formats(self) -> None:
        tracefs = self.tracefs
        decoders = self._decoders
        names = [*LIFE_EVENTS, *(SCHED_EVENTS if "sched" in self.groups else ())]
        for name in names:
            fmt = tracefs.read_format(SCHED_SYSTEM, name)
            decoder = sched_decoder(fmt)
            assert decoder is not None  # one of the names it decodes
            decoders[fmt.id] = decoder
        if "syscalls" in self.groups:
            for event_id, event in tracefs.event_ids(SYSCALLS_SYSTEM).items():
                syscall = syscall_event_decoder(event)
                if syscall is not None:
                    decoders[event_id] = syscall
        marker = tracefs.read_format(FTRACE_SYSTEM, FTRACE_PRINT)
        self._marker = (marker.id, marker.field("buf").offset)

    def _enable(self) -> None:
        """Enable the events (once the first thread is listed: an empty list is everyone)."""
        tracefs, name = self.tracefs, self.tracefs_instance.name
        self.tracefs_instance.enable(SCHED_SYSTEM, SCHED_PROCESS_FORK)
        self.tracefs_instance.enable(SCHED_SYSTEM, SCHED_PROCESS_EXIT)
        if "sched" in self.groups:
            for event in (SCHED_SWITCH, SCHED_WAKEUP, SCHED_WAKEUP_NEW):
                self.tracefs_instance.enable(SCHED_SYSTEM, event)
        if "syscalls" in self.groups:
            tracefs.set_system_enabled(name, SYSCALLS_SYSTEM, True)
        self._enabled = True

    # --- the clock ------------------------------------------------------------------

    def _check_clock(self) -> ClockCheck:
        tai = time.clock_gettime_ns(time.CLOCK_TAI)
        real = time.clock_gettime_ns(time.CLOCK_REALTIME)
        seconds = round((tai - real) / 1e9)
        check = ClockCheck(seconds * 1_000_000_000, clocksource=_clocksource())
        self._offset = check.offset_ns
        windows: dict[int, tuple[int, int]] = {}
        fd = os.open(self.tracefs.trace_marker(self.tracefs_instance.name), os.O_WRONLY)
        try:
            for number in range(CLOCK_CHECKS):
                before = time.clock_gettime_ns(time.CLOCK_REALTIME)
                os.write(fd, f"{_MARK}{number}".encode("ascii"))
                after = time.clock_gettime_ns(time.CLOCK_REALTIME)
                windows[number] = (before, after)
        finally:
            os.close(fd)
        for stamp, payload in self._read_records():
            marker_id, text_at = self._marker
            if payload[0] | (payload[1] << 8) != marker_id:
                continue
            text = bytes(payload[text_at : text_at + 64]).split(b"\0", 1)[0]
            digits = text.removeprefix(_MARK.encode()).rstrip(b"\n")  # the kernel adds one
            if not text.startswith(_MARK.encode()) or not digits.isdigit():
                continue
            window = windows.get(int(digits))
            if window is None:
                continue
            mapped = stamp - self._offset
            check.checks += 1
            check.widest_window_ns = max(check.widest_window_ns, window[1] - window[0])
            outside = max(window[0] - mapped, mapped - window[1], 0)
            if outside:
                check.worst_outside_ns = max(check.worst_outside_ns, outside)
            else:
                check.inside += 1
        return check

    # --- threads --------------------------------------------------------------------

    def watch(self, tids: Iterable[int]) -> None:
        """The main loop's (it owns the timeline): list the processes of these writer
        threads, each not listed yet, with every thread of it (a ``/proc`` lookup)."""
        self._take_announced()
        timeline = self.timeline
        unknown = []
        with self._listing:  # once for the batch: the processes are the listing's
            for tid in tids:
                if tid <= 0:
                    continue
                known = timeline.process(tid, live=True)
                if known is None or not self.processes.listed(known):
                    unknown.append(tid)
        if unknown:
            for tid, since, key in self._list(unknown):
                timeline.watch(tid, since, key)

    def watch_announced(self, tids: Iterable[int]) -> None:
        """List the processes of these threads from another thread than the main loop's
        (the one that answers announcements): it never waits for a read of the kernel's
        events, so an app's announcement is answered on time however long a read takes,
        and the timeline learns of the threads at the next read."""
        watched = self._list([tid for tid in tids if tid > 0])
        with self._listing:
            room = MAX_ANNOUNCED_THREADS - len(self._announced)
            self._announced += watched[: max(room, 0)]
            self.stats.announced_dropped += max(len(watched) - max(room, 0), 0)

    def _take_announced(self) -> None:
        """The threads listed from the announcements' thread, into the timeline."""
        if not self._announced:
            return
        with self._listing:
            taken, self._announced = self._announced, []
        for tid, since, key in taken:
            self.timeline.watch(tid, since, key)

    def _list(self, tids: Iterable[int]) -> list[tuple[int, int, ProcessKey]]:
        """Look up the processes of ``tids`` in ``/proc``, list each new one (every thread
        of it) in ``set_event_pid`` and enable the events once: the threads to watch, each
        with the time it is watched from."""
        since = time.time_ns()  # before the write: every event of a listed thread is after
        watched: list[tuple[int, int, ProcessKey]] = []
        with self._listing:
            processes = self.processes
            new: dict[ProcessKey, list[int]] = {}
            for tid in tids:
                key = process_of(tid)
                if key is None:
                    self.stats.processes_not_watched += 1
                    continue
                if processes.listed(key):  # the timeline forgot it, or never looked it up
                    watched.append((tid, since, key))
                    continue
                if key in new:
                    continue
                threads = threads_of(key.pid)
                if not threads:
                    self.stats.processes_not_watched += 1
                    continue
                new[key] = threads
            if not new:
                return watched
            listed = [tid for threads in new.values() for tid in threads]
            try:
                self.tracefs.add_event_pids(self.tracefs_instance.name, listed)
            except OSError:  # a thread exited meanwhile (EINVAL): the others, once more
                listed = [t for t in listed if os.path.exists(f"/proc/{t}")]
                try:
                    if not listed:  # never an empty list: to the kernel, that is everyone
                        raise OSError("every thread exited")
                    self.tracefs.add_event_pids(self.tracefs_instance.name, listed)
                except OSError:
                    self.stats.processes_not_watched += len(new)
                    return watched
            alive = set(listed)
            for key, threads in new.items():
                processes.add(key)
                self.stats.processes += 1
                watched += [(tid, since, key) for tid in threads if tid in alive]
            if not self._enabled:
                self._enable()
        return watched

    def process_of(self, tid: int) -> ProcessKey | None:
        """The process of a watched thread (looked up in ``/proc`` once, for a thread a fork
        event watched); None if the thread is not watched or its process is gone."""
        timeline = self.timeline
        if not timeline.watched(tid):
            return None
        key = timeline.process(tid)
        if key is None:
            key = process_of(tid) or UNKNOWN
            timeline.set_process(tid, key)
        return None if key == UNKNOWN else key

    def lost_within(self, start: int, end: int, tid: int = 0) -> bool:
        """Whether events may have been lost between ``start`` and ``end`` (span clock)."""
        losses = self.losses
        return bool(losses) and any(a <= end and start <= b for a, b in losses)

    # --- reading --------------------------------------------------------------------

    def read(self) -> int:
        """Read every event available now into the timeline; how many decoded.

        The CPUs' buffers are read one after another, so a CPU read last gives events
        later than the first one's last: those after the moment the read began are held
        for the next read (at most one read's worth) and fed sorted with its events, so a
        thread that moved between CPUs gets its events in order."""
        self.reads += 1
        now = time.time_ns()
        self.timeline.next_read(now)
        for key in self.pauses.resume(now, self._last_count) if self.pauses.paused else ():
            account = self._left_out.pop(key, None)
            if account is not None:
                account.closed = False
        began = time.clock_gettime_ns(time.CLOCK_TAI)  # the trace clock (CLOCK)
        records = self._held + self._read_records()
        self._last_count = len(records)
        self._take_announced()  # after: a thread listed during the read has events in it
        records.sort(key=_STAMP)
        split = bisect_right(records, began, key=_STAMP)
        self._held = records[split:]
        return self.feed(records[:split])

    def leave_out_over_budget(self) -> None:
        """A process found over its budget is left out at once (:mod:`.kernel_pauses`)."""
        self.timeline.budget.on_empty = self._leave_out

    def _leave_out(self, account: EventAccount, when: int) -> None:
        if not isinstance(account.key, ProcessKey) or account.key in self.pauses.paused:
            return
        tids = self.timeline.threads_charged_to(account)
        if self.pauses.pause(account.key, tids, time.time_ns()):
            account.left, account.closed = 0, True
            self._left_out[account.key] = account  # the bucket its threads hold, reopened
            # on its return even if the budget has forgotten it meanwhile (MAX_ACCOUNTS)
            self.timeline.mark_unknown(tids, when)

    def _write_notrace(self, tids: list[int]) -> None:
        self.tracefs.set_notrace_pids(self.tracefs_instance.name, tids)

    def feed(self, records: list[tuple[int, memoryview]]) -> int:
        """Decode (trace-clock time, record) pairs into the timeline, in time order
        (:func:`.kernel_feed.feed`); count what does not decode."""
        count, undecodable = kernel_feed.feed(
            records, self._decoders, self._offset, self.timeline, self._leader_exited
        )
        self.stats.records += count
        self.stats.undecodable += undecodable
        return count

    def _leader_exited(self, process: ProcessKey) -> None:
        with self._listing:
            self.processes.exited(process)

    def _read_records(self) -> list[tuple[int, memoryview]]:
        records: list[tuple[int, memoryview]] = []
        for _, raw in self.pipes.read(self.layout.page_size, count_idle_cpus=False):
            try:
                page = parse_page(raw, self.layout)
            except PageError:
                self.stats.undecodable += 1
                continue
            if page.missed:
                self._note_loss()
            records += page.events
        self.stats.lost = self.pipes.lost
        if self.pipes.last_read_lost:
            self._note_loss()
        self._last_read = time.time_ns()
        return records  # sorted by :meth:`read`, with the events it held

    def _note_loss(self) -> None:
        interval = (self._last_read, time.time_ns())
        if self.losses and self.losses[-1][0] == interval[0]:
            return
        self.losses.append(interval)
        if len(self.losses) > MAX_LOSS_TIMES:
            del self.losses[: MAX_LOSS_TIMES // 2]


def _STAMP(item: tuple[int, memoryview]) -> int:  # noqa: N802 - a sort key
    return item[0]


def _clocksource() -> str | None:
    try:
        with open(CLOCKSOURCE, encoding="ascii", errors="replace") as f:
            return f.read(64).strip() or None
    except OSError:
        return None
