# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Each span with what the kernel did for its thread while it ran (``record --kernel``).

The thread is the span's ``linux.thread.id`` attribute when the app set it and it names a
thread of the process that wrote the record (a span cannot borrow another process's
figures), else the thread that wrote its record (``common_pid``): the exporters write a span
when it ends, on the thread that ends it (a ``BatchSpanProcessor`` writes from its own thread:
set ``linux.thread.id``). ``thread.id`` is the app's (the semantic conventions' "managed"
thread id, ``threading.get_ident()``, not an OS thread): never read, never written. The
interval is the span's own ``[start, end]``, whatever it claims: a span sums at most
:data:`.MAX_SCAN` events, and the spans of one process and all spans share budgets per read
and per second (:mod:`.kernel_budget`); what a budget leaves out is ``unknown_ns`` of a
``partial`` span.
Attributes added (an app's own attribute of the same name wins); durations in nanoseconds:

- ``linux.thread.id`` (:data:`THREAD`), the thread summed over: its tid as the kernel's
  records give it (the host's pid namespace).
- ``linux.sched.on_cpu_ns``, ``linux.sched.off_cpu_ns``: on a CPU, and off it.
- ``linux.sched.runnable_ns`` (ready, waiting for a CPU: preempted, or woken and not run
  yet), ``linux.sched.sleeping_ns`` (``S``: futex, socket, timer), ``linux.sched.blocked_ns``
  (``D``: uninterruptible), ``linux.sched.other_ns`` (stopped, traced): the off-CPU time by
  why.
- ``linux.sched.switches.voluntary``, ``linux.sched.switches.involuntary``: as the kernel
  counts them in ``/proc/<tid>/status`` (``process.context_switch_type`` values).
- ``linux.syscall.count``, ``linux.syscall.time_ns``; ``linux.syscall.top.name``,
  ``linux.syscall.top.count``, ``linux.syscall.top.time_ns``: the syscalls that took the most
  time, at most :data:`TOP_SYSCALLS`, in that order.
- ``linux.kernel.view``: ``whole``, or ``partial`` when the reader knows part of the span is
  missing (the thread was listed after the span started, or the kernel lost events meanwhile;
  ``linux.kernel.unknown_ns`` then says how much of it is not known); ``none`` when the
  thread is not watched.
- ``linux.thread.shared``: ``true`` when another span on the same thread, neither this
  span's descendant nor its ancestor, overlapped it (an asyncio loop): the figures are the
  thread's, not this span's alone. The reader can tell only from spans that ended first.

And a ``linux.sched.off_cpu`` span event for each stretch off the CPU of at least the
threshold (``--kernel-wait-threshold``), the longest :data:`MAX_WAIT_EVENTS` (the rest in the
span's dropped events count), at the time the thread left the CPU, with
``linux.sched.state``, ``linux.sched.off_cpu_ns``, ``linux.sched.runnable_ns`` (of it, the
wait for a CPU after the wake-up), the ``linux.syscall.name`` it was in, and the thread that
woke it, ``linux.sched.waker.tid``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from opentelemetry_exporter_userevents.abi.sched import (
    BLOCKED,
    OTHER,
    RUNNABLE,
    SLEEPING,
    STATE_NAMES,
)
from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedEvent,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.terminal_text import printable
from opentelemetry_exporter_userevents.reader.views.kernel_budget import ScanBudget
from opentelemetry_exporter_userevents.reader.views.kernel_event_budget import EventBudget
from opentelemetry_exporter_userevents.reader.views.kernel_events import KernelEvents
from opentelemetry_exporter_userevents.reader.views.kernel_processes import UNKNOWN, ProcessKey
from opentelemetry_exporter_userevents.reader.views.kernel_sums import ThreadSummary

TOP_SYSCALLS = 5
MAX_WAIT_EVENTS = 32
DEFAULT_WAIT_THRESHOLD_NS = 1_000_000
OFF_CPU_EVENT = "linux.sched.off_cpu"
VIEW = "linux.kernel.view"
THREAD = "linux.thread.id"
"""The OS thread id (``gettid``, host's pid namespace) a span is summed over: the semantic
conventions have no name for it (their ``thread.id`` is the runtime's own thread id)."""
_RECENT_SPANS = 64


@dataclass
class KernelViewStats:
    spans: int = 0
    """Spans given a kernel view."""
    partial: int = 0
    not_watched: int = 0
    shared: int = 0
    scanned: int = 0
    """Kernel events summed for spans (what the budgets bound)."""
    threads_refused: int = 0
    """Spans whose ``linux.thread.id`` named a thread not of their writer's process (or not
    watched): summed over the writer's thread instead."""
    over_budget: int = 0
    """Spans cut short by a budget (:data:`.MAX_SCAN`, :mod:`.kernel_budget`): partial."""


class _Recent:
    """The last spans enriched on one thread: (start, end, span id, parent span id)."""

    __slots__ = ("spans", "latest_end")

    def __init__(self) -> None:
        self.spans: deque[tuple[int, int, int, int | None]] = deque(maxlen=_RECENT_SPANS)
        self.latest_end = 0
        """The latest end of any span kept so far: a span that starts after it overlaps
        none (most do: the cost of a thread's spans one after another is one compare)."""


class KernelView:
    """Adds the kernel's view to checked spans: a plug-in of the join (its
    ``span_enricher``), whose events the pipeline reads up to each batch of records before
    the join takes them (:meth:`take_writers`)."""

    def __init__(
        self,
        events: KernelEvents,
        wait_threshold_ns: int = DEFAULT_WAIT_THRESHOLD_NS,
        budget: ScanBudget | None = None,
    ) -> None:
        self.events = events
        self.wait_threshold_ns = wait_threshold_ns
        self.stats = KernelViewStats()
        self._recent: dict[int, _Recent] = {}
        self.budget = budget or ScanBudget()
        self._read = events.reads

    def take_writers(self, pids: set[int]) -> None:
        """Before a batch of records is joined: list their writers (a new process: every
        thread of it), then read the kernel's events so far, so every kernel event up to a
        record's time is in the timeline when the record is."""
        self.events.watch(pids)
        self.events.read()

    def __call__(self, span: CheckedSpan, writer_tid: int) -> CheckedSpan:
        events = self.events
        writer = events.timeline.process(writer_tid)  # known: most spans, at once
        if writer is None or writer == UNKNOWN:
            writer = events.process_of(writer_tid)
        tid = writer_tid
        named = span.attributes.get(THREAD)
        if isinstance(named, int) and not isinstance(named, bool) and named != writer_tid:
            if writer is not None and events.process_of(named) == writer:
                tid = named
            else:
                self.stats.threads_refused += 1
        start, end = span.start_time_ns, span.end_time_ns
        if self._read != events.reads:
            self._read = events.reads
            self.budget.new_read()
        payer: ProcessKey | int = writer if writer is not None else writer_tid
        allowance = self.budget.allowance(payer)
        summary = events.timeline.summary(tid, start, end, self.wait_threshold_ns, allowance)
        if summary is not None:
            self.budget.spend(payer, summary.scanned)
            self.stats.scanned += summary.scanned
            self.stats.over_budget += summary.cut
        span_events = span.events
        dropped = span.dropped_events
        if summary is None:
            self.stats.not_watched += 1
            added: dict[str, Any] = {THREAD: tid, "linux.kernel.view": "none"}
        else:
            self.stats.spans += 1
            lost = events.lost_within(start, end, tid)  # asked each time: a capture counts why
            partial = summary.partial or lost
            self.stats.partial += partial
            added = _attributes(tid, summary, partial)
            if self._shared(tid, span):
                added["linux.thread.shared"] = True
                self.stats.shared += 1
            waits = summary.waits
            if waits:
                waits = sorted(waits, key=_DURATION, reverse=True)
                kept = sorted(waits[:MAX_WAIT_EVENTS], key=_START)
                span_events = list(span_events) + [_wait_event(wait) for wait in kept]
                dropped += len(waits) - len(kept)
            if len(span_events) > 1:  # a span's own events come out in time order too
                span_events = sorted(span_events, key=_TIME)
        own = span.attributes
        attributes = {**own, **added}  # the app's keys keep their places, ours follow
        for key in own.keys() & added.keys():  # and the app's own values win
            attributes[key] = own[key]
        # span._replace(attributes=..., events=..., dropped_events=...), for a fraction of
        # its cost (it runs once per span)
        return _SPAN(span[:_ATTRIBUTES] + (attributes, span[_ATTRIBUTES + 1], span_events,
                                          dropped) + span[_DROPPED_EVENTS + 1 :])  # fmt: skip

    def _shared(self, tid: int, span: CheckedSpan) -> bool:
        recent = self._recent.get(tid)
        if recent is None:
            if len(self._recent) >= 4096:
                del self._recent[next(iter(self._recent))]
            recent = self._recent[tid] = _Recent()
        start, end = span.start_time_ns, span.end_time_ns
        shared = False
        if recent.latest_end > start:  # else none of them overlaps it: one after another
            parents: dict[int, int | None] | None = None
            for other_start, other_end, other_id, _ in recent.spans:
                if other_end <= start or other_start >= end or other_id == span.span_id:
                    continue
                if parents is None:
                    parents = {s[2]: s[3] for s in recent.spans}
                if not _descends(other_id, span.span_id, parents) and not _descends(
                    span.span_id, other_id, parents | {span.span_id: span.parent_span_id}
                ):
                    shared = True
                    break
        recent.spans.append((start, end, span.span_id, span.parent_span_id))
        recent.latest_end = max(recent.latest_end, end)
        return shared


_SPAN = CheckedSpan._make
_ATTRIBUTES = CheckedSpan._fields.index("attributes")
_DROPPED_EVENTS = CheckedSpan._fields.index("dropped_events")
assert CheckedSpan._fields[_ATTRIBUTES : _DROPPED_EVENTS + 1] == (
    "attributes", "dropped_attributes", "events", "dropped_events",
)  # fmt: skip
_DURATION = attrgetter("duration")
_START = attrgetter("start")
_TIME = attrgetter("time_ns")


def _descends(span_id: int, ancestor: int, parents: dict[int, int | None]) -> bool:
    """Whether ``span_id`` is ``ancestor``'s descendant, through the parents known."""
    seen = 0
    current: int | None = parents.get(span_id)
    while current is not None and seen <= _RECENT_SPANS:
        if current == ancestor:
            return True
        current = parents.get(current)
        seen += 1
    return False


def _attributes(tid: int, summary: ThreadSummary, partial: bool) -> dict[str, Any]:
    off = summary.off_cpu
    attributes: dict[str, Any] = {
        THREAD: tid,
        "linux.kernel.view": "partial" if partial else "whole",
        "linux.sched.on_cpu_ns": summary.on_cpu,
        "linux.sched.off_cpu_ns": sum(off.values()),
        "linux.sched.runnable_ns": off.get(RUNNABLE, 0),
        "linux.sched.sleeping_ns": off.get(SLEEPING, 0),
        "linux.sched.blocked_ns": off.get(BLOCKED, 0),
        "linux.sched.other_ns": off.get(OTHER, 0),
        "linux.sched.switches.voluntary": summary.voluntary,
        "linux.sched.switches.involuntary": summary.involuntary,
    }
    if summary.unknown:
        attributes["linux.kernel.unknown_ns"] = summary.unknown
    calls = summary.syscalls
    if not calls:
        attributes["linux.syscall.count"] = attributes["linux.syscall.time_ns"] = 0
        return attributes
    count = spent = 0
    for tally in calls.values():
        count += tally[0]
        spent += tally[1]
    attributes["linux.syscall.count"] = count
    attributes["linux.syscall.time_ns"] = spent
    top = sorted(calls.items(), key=_TOP)[:TOP_SYSCALLS] if len(calls) > 1 else list(calls.items())
    attributes["linux.syscall.top.name"] = [name for name, _ in top]
    attributes["linux.syscall.top.count"] = [tally[0] for _, tally in top]
    attributes["linux.syscall.top.time_ns"] = [tally[1] for _, tally in top]
    return attributes


def _TOP(item: tuple[str, list[int]]) -> tuple[int, int, str]:  # noqa: N802 - a sort key
    """The syscalls that took longest first, then the most made, then by name."""
    return (-item[1][1], -item[1][0], item[0])


def _wait_event(wait: Any) -> CheckedEvent:
    attributes: dict[str, Any] = {
        "linux.sched.state": STATE_NAMES[wait.state],
        "linux.sched.off_cpu_ns": wait.duration,
        "linux.sched.runnable_ns": wait.runnable,
    }
    if wait.syscall is not None:
        attributes["linux.syscall.name"] = wait.syscall
    if wait.waker is not None:
        attributes["linux.sched.waker.tid"] = wait.waker
    return CheckedEvent(OFF_CPU_EVENT, wait.start, attributes, 0)


def kernel_clock_line(events: KernelEvents) -> str:
    """What the start-up clock check found, for the reader's first lines."""
    check = events.clock
    if check is None:
        return "kernel view: the clock was not checked"
    line = (
        f"kernel view ({', '.join(events.groups)}): trace clock tai, "
        f"{check.offset_ns // 1_000_000_000} s from CLOCK_REALTIME; "
        f"{check.inside} of {check.checks} clock checks within their "
        f"{check.widest_window_ns / 1000:.1f} µs windows"
    )
    if check.worst_outside_ns:
        line += f", the worst {check.worst_outside_ns / 1000:.1f} µs outside"
    if check.clocksource is not None:
        line += f"; clocksource {printable(check.clocksource)}"
        if "jiffies" in check.clocksource:
            line += " (coarse: every time is rounded to a tick, and each figure with it)"
    return line


def kernel_parts(view: object) -> list[str]:
    """The summary's counts of the kernel view (``view``: the join_stage's enricher)."""
    if not isinstance(view, KernelView):
        return []
    stats, events, timeline = view.stats, view.events.stats, view.events.timeline.stats
    parts = [
        f"kernel view of {stats.spans} spans ({stats.partial} partial, {stats.shared} on "
        f"a shared thread) from {events.records} kernel events of {events.processes} "
        "processes"
    ]
    for label, count in (
        ("spans of threads not watched", stats.not_watched),
        ("kernel events lost", events.lost),
        ("kernel events undecodable", events.undecodable),
        ("processes not watched", events.processes_not_watched),
        (
            "announcing threads watched from their first record (too many waiting)",
            events.announced_dropped,
        ),
        (
            "spans naming a linux.thread.id not of their writer's process (refused)",
            stats.threads_refused,
        ),
        ("spans cut short by the kernel view's budgets", stats.over_budget),
        ("kernel timeline trims (oldest halves forgotten)", timeline.trims),
        ("threads forgotten to make room", timeline.threads_forgotten),
        ("kernel events out of order (dropped)", timeline.out_of_order),
        ("threads replaced by a new one of the same tid", timeline.threads_replaced),
    ):
        if count:
            parts.append(f"{count} {label}")
    budget, pauses = view.events.timeline.budget, view.events.pauses
    if budget.dropped:
        parts.append(f"{budget.dropped} kernel events over their process's budget (not summed: "
                     f"{dropped_by_process(budget)}; their threads' spans partial)")  # fmt: skip
    if pauses.count:
        parts.append(f"{pauses.count} times a process over its budget was left out of the "
                     "kernel's events for a second")  # fmt: skip
    if pauses.failed:
        parts.append(f"{pauses.failed} times the kernel did not take the list of processes "
                     "left out (set_event_notrace_pid)")  # fmt: skip
    return parts


def dropped_by_process(budget: EventBudget) -> str:
    """``pid 123 4500, pid 77 12, others 3``: the processes whose kernel events were over
    their budget, the most first."""
    return ", ".join(
        f"others {count}" if key is None else f"{_payer_name(key)} {count}"
        for key, count in budget.by_process()
    )


def _payer_name(key: object) -> str:
    if isinstance(key, ProcessKey):
        return f"pid {key.pid}"
    return f"tid {key[1]}" if isinstance(key, tuple) and len(key) == 2 else "?"
