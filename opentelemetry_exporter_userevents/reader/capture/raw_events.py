# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Every record of a capture, ours and the kernel's, merged by time (``decode --kernel``),
with what the file says of its trace clock, its CPUs and what the kernel lost.

A trace.dat's CPUs are merged page by page as :mod:`.decode` merges our records; a
perf.data's samples are sorted by perf's round markers, as there. Streaming notes each
loss the file records, as an interval of the capture's clock:
a trace.dat page marked "events missed" (from the CPU's previous record to the page's
first), a perf ``LOST`` record (from the newest sample perf had sorted before it to the
newest of the round after it: the kernel does not say when). At most :data:`MAX_LOSSES`
intervals are kept; past that the last one is stretched to cover the new one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

from opentelemetry_exporter_userevents.abi.ring_buffer import PageError, PageLayout, parse_page
from opentelemetry_exporter_userevents.reader.capture.perf_data import (
    Lost,
    PerfData,
    PerfDataStats,
)
from opentelemetry_exporter_userevents.reader.capture.trace_dat import TraceDat
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats

MAX_LOSSES = 4096
"""Loss intervals kept; past that the last one is stretched over the next (a capture
losing that often makes most spans partial anyway)."""
PERF_CLOCKS = {0: "realtime", 1: "mono", 4: "mono_raw", 7: "boot", 11: "tai"}
"""``perf record -k``'s clock ids, by the names ftrace gives the same clocks."""
PERF_OWN_CLOCK = "perf"
"""perf's default clock (``local_clock``, as ftrace's ``perf`` clock)."""
_STAMP = itemgetter(0)


class RawEvent(NamedTuple):
    stamp: int
    """The capture's clock."""
    cpu: int
    record: memoryview
    pid: int
    """The process of the thread it ran on when the file says (perf); else -1."""


@dataclass
class RawCapture:
    """A capture's records as a stream, and what the file says of them."""

    clock: str | None
    """The trace clock's name (ftrace's names: ``local``, ``tai``, ``mono``...; ``perf`` for
    perf's own), None when the file does not say."""
    reference: tuple[int, int] | None
    """(CLOCK_REALTIME ns, the clock's ns) read at one moment, when the file holds one."""
    stream: Callable[[DecoderStats], Iterator[RawEvent]]
    """Every record by time, streamed from the file again at each call (pages counted in
    the stats given); a stream read to its end fills :attr:`losses`."""
    notes: Callable[[], list[str]] = list
    """What the last stream could not read (perf's compressed or damaged records)."""
    unordered: Callable[[DecoderStats], Iterator[RawEvent]] | None = None
    """The same records in file order (cheaper: nothing is sorted), for a first pass that
    needs no order; None: :attr:`stream`'s order."""
    missing_cpus: list[str] = field(default_factory=list)
    """CPUs whose data the file announces but does not hold whole (``CPU 2``, ``CPU 1 of
    buffer NAME``)."""
    losses: list[tuple[int, int]] = field(default_factory=list)
    lost: int = 0
    """Records the kernel lost, as far as the file counts them (a page that says only
    "missed" counts 1)."""
    buffers: list[str] = field(default_factory=list)
    """The trace.dat instance buffers streamed beside the top one (those on its clock)."""

    def note_loss(self, start: int, end: int, count: int) -> None:
        self.lost += count
        if len(self.losses) >= MAX_LOSSES:
            last = self.losses.pop()
            start, end = min(last[0], start), max(last[1], end)
        self.losses.append((start, end))

    def reset(self) -> None:
        """Forget what a previous stream noted (the next one notes it again)."""
        self.losses.clear()
        self.lost = 0


def trace_dat_raw(dat: TraceDat, layout: PageLayout) -> RawCapture:
    """The top buffer's CPUs and those of each instance buffer on the same clock (as
    ``record --capture --kernel`` writes the kernel view's instance), each CPU of an
    instance a stream of its own (``k << 32 | cpu``, k its rank)."""
    buffers = [dat, *(b for b in dat.instances if b.clock == dat.clock)]
    missing = [_label(b, cpu) for b in buffers for cpu in b.missing_cpus]
    capture = RawCapture(dat.clock, None, lambda stats: iter(()), missing_cpus=missing)
    capture.buffers = [buffer.name for buffer in buffers[1:]]

    def cpus(stats: DecoderStats) -> list[Iterator[RawEvent]]:
        capture.reset()
        return [
            _cpu_events(rank << 32 | cpu, pages, layout, capture, stats)
            for rank, buffer in enumerate(buffers)
            for cpu, pages in buffer.cpu_pages()
        ]

    def stream(stats: DecoderStats) -> Iterator[RawEvent]:
        return heapq.merge(*cpus(stats), key=_STAMP)

    def unordered(stats: DecoderStats) -> Iterator[RawEvent]:
        for events in cpus(stats):
            yield from events

    capture.stream, capture.unordered = stream, unordered
    return capture


def _label(buffer: TraceDat, cpu: int) -> str:
    return f"CPU {cpu}" + (f" of buffer {buffer.name}" if buffer.name else "")


def _cpu_events(
    cpu: int, pages: Iterator[memoryview], layout: PageLayout, capture: RawCapture,
    stats: DecoderStats,
) -> Iterator[RawEvent]:  # fmt: skip
    last: int | None = None
    for raw in pages:
        stats.pages += 1
        try:
            page = parse_page(raw, layout)
        except PageError:
            stats.corrupt_pages += 1
            continue
        if page.missed:
            stats.pages_with_missed_events += 1
        if not page.events:
            continue
        first = page.events[0][0]
        if page.missed:
            capture.note_loss(first if last is None else last, first, page.missed_count or 1)
        for stamp, record in page.events:
            yield RawEvent(stamp, cpu, record, -1)
        last = page.events[-1][0]


def perf_raw(perf: PerfData) -> RawCapture:
    if perf.clockid is None:
        clock: str | None = PERF_OWN_CLOCK
    else:
        clock = PERF_CLOCKS.get(perf.clockid, f"clock {perf.clockid}")
    capture = RawCapture(clock, perf.clock_reference, lambda stats: iter(()))
    capture.stream = lambda stats: _perf_events(perf, capture)
    capture.unordered = lambda stats: _perf_events(perf, capture, ordered=False)
    return capture


def _perf_events(perf: PerfData, capture: RawCapture, ordered: bool = True) -> Iterator[RawEvent]:
    """Samples by time, as :func:`.decode._perf_records` sorts ours (or in file order)."""
    capture.reset()
    perf.stats = PerfDataStats()  # counts this stream's
    waiting: list[tuple[int, int, RawEvent]] = []
    losses: list[list[int]] = []  # [start, round ends to wait for]
    sequence = 0
    newest = ready = -1
    for item in perf.samples_rounds_and_losses():
        if item is None:
            while waiting and waiting[0][0] <= ready:
                yield heapq.heappop(waiting)[2]
            ready = newest
            for loss in losses:
                loss[1] -= 1
            while losses and losses[0][1] <= 0:
                start = losses.pop(0)[0]
                capture.note_loss(start, max(start, newest), 0)
            continue
        if isinstance(item, Lost):
            capture.lost += item.samples
            losses.append([max(ready, 0), 2])
            continue
        event = RawEvent(item.timestamp, item.cpu, item.raw, item.pid)
        if not ordered:
            newest = max(newest, item.timestamp)
            yield event
            continue
        heapq.heappush(waiting, (item.timestamp, sequence, event))
        sequence += 1
        newest = max(newest, item.timestamp)
    for start, _ in losses:
        capture.note_loss(start, max(start, newest), 0)
    while waiting:
        yield heapq.heappop(waiting)[2]
