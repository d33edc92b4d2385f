# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``decode --kernel``: a capture's spans with what the kernel did for their threads, from
the scheduler's and syscalls' records the same file holds; and ``record --capture
--kernel`` (:class:`KernelCapture`), which keeps them there.

Two passes over the file: the first counts the kernel's records by group, notes each CPU's
first record and the losses, and estimates the clock from our spans
(:mod:`..views.kernel_capture_clock`); the second feeds the kernel's records to the
timeline and ours to the join_stage, in time order, each at most :data:`.BATCH` records
behind the other (so a span is summed once every kernel record before its own is in)."""

from __future__ import annotations

import argparse
import os
import struct
from collections.abc import Iterable, Iterator
from typing import TextIO

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageError, parse_page
from opentelemetry_exporter_userevents.abi.sched import (
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
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.reader.capture import DecodedCapture, TraceDatWriter
from opentelemetry_exporter_userevents.reader.capture.decode import BATCH
from opentelemetry_exporter_userevents.reader.capture.raw_events import RawEvent
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats, TraceRecord
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from opentelemetry_exporter_userevents.reader.terminal_text import printable
from opentelemetry_exporter_userevents.reader.views.kernel_capture import (
    WATCH_MARK,
    CaptureKernelEvents,
)
from opentelemetry_exporter_userevents.reader.views.kernel_capture_clock import (
    ClockEstimate,
    clock_line,
    map_clock,
)
from opentelemetry_exporter_userevents.reader.views.kernel_events import (
    CLOCK,
    KernelEvents,
    parse_groups,
)
from opentelemetry_exporter_userevents.reader.views.kernel_processes import (
    ListedProcesses,
    ProcessKey,
)
from opentelemetry_exporter_userevents.reader.views.kernel_view import (
    KernelView,
    kernel_clock_line,
    kernel_parts,
)

__all__ = ["CaptureKernelSource", "KernelCapture", "kernel_parts", "kernel_view_of"]
_PID = struct.Struct("<i").unpack_from

SPAN = "span"
NEW_LISTINGS = 1024
"""Processes listed whose threads are not marked yet, kept at most."""
TIDS_PER_MARK = 256
"""Thread ids in one watch mark (``trace_marker`` takes a few KiB a write); a listing of
more threads writes more marks."""


def kernel_view_of(
    args: argparse.Namespace, decoded: DecodedCapture, err: TextIO
) -> CaptureKernelSource:
    """The view, and the source that decodes the file for it (after the first pass)."""
    raw = decoded.raw
    assert raw is not None
    events = CaptureKernelEvents(decoded.capture_formats, parse_groups(args.kernel),
                                 decoded.decoder.layout)  # fmt: skip
    ours = set()
    for text in decoded.formats + decoded.other_formats:
        try:
            ours.add(parse_format(text).id)
        except ValueError:
            continue
    events.forget_ids(ours)  # a kernel event that claims one of our ids is not read as it
    for reason in events.refused:
        err.write(f"otel-userevents: kernel view: not reading {printable(reason)}\n")
    decoder = decoded.decoder
    estimate = ClockEstimate()
    found: list[TraceRecord] = []
    for event in (raw.unordered or raw.stream)(DecoderStats()):
        if events.is_kernel(event.record):
            events.census(event.stamp, event.cpu, event.record, event.pid)
        elif decoder.decode_record(event.stamp, event.record, found):
            record = found.pop()
            events.note_writer(record.pid, event.pid)
            if record.kind == SPAN:
                estimate.add(record.timestamp, record.pid, record.values.get("end_time_ns"))
    decoder.stats = DecoderStats()  # the second pass counts
    clock = map_clock(raw.clock, raw.reference, estimate)
    events.cover(clock, raw.missing_cpus, list(raw.losses))
    groups = ", ".join(events.groups)
    err.write(f"otel-userevents: kernel view ({groups}) from the capture: "
              f"{printable(clock_line(clock))}\n")  # fmt: skip
    if raw.buffers:  # the notes say decode reads none of them: for our records
        err.write("otel-userevents: kernel view: the kernel's events of trace-cmd instance "
                  f"buffers {printable(', '.join(raw.buffers))} read too\n")  # fmt: skip
    view = KernelView(events, int(args.kernel_wait_threshold * 1_000_000))

    return CaptureKernelSource(view, events, decoded)


class CaptureKernelSource:
    """``decode --kernel``'s source: the capture's records, ours decoded in-process, and
    the kernel's fed to the view (:meth:`records`); the view is the join's span
    enricher."""

    def __init__(
        self, view: KernelView, events: CaptureKernelEvents, decoded: DecodedCapture
    ) -> None:
        self.view, self.events, self.decoded = view, events, decoded

    def batches(self) -> Iterator[list[TraceRecord]]:
        """Our records by time, in batches; before each, the kernel's up to it are in the
        view (each at most :data:`.BATCH` records behind the other, so a span is
        summed once every kernel record before its own is in)."""
        raw, decoder, events = self.decoded.raw, self.decoded.decoder, self.events
        assert raw is not None
        kernel: list[RawEvent] = []
        records: list[TraceRecord] = []
        for event in raw.stream(decoder.stats):
            if events.is_kernel(event.record):
                kernel.append(event)
                if len(kernel) < BATCH:
                    continue
            else:
                decoder.decode_record(event.stamp, event.record, records)
                if len(records) < BATCH:
                    continue
            events.take(kernel)
            yield records
            kernel, records = [], []
        events.take(kernel)
        yield records
        self.decoded.notes.extend(raw.notes())

    def notes(self) -> list[str]:
        """Why spans were partial, once each."""
        return self.events.notes()


class KernelCapture:
    """``record --capture FILE --kernel``: the kernel view's instance read beside the
    reader's, its pages kept in the same trace.dat as an instance buffer
    (:data:`BUFFER`), as ``trace-cmd record -B`` keeps one, so that ``trace-cmd report``
    shows both and ``decode --kernel`` reads both.

    A version 6 trace.dat has one trace clock, so the reader's instance takes the kernel
    view's, ``tai``, before anything is enabled; ``decode`` maps it to the spans' clock to
    the whole second. The writers are listed as live (``set_event_pid``): each process
    whose records a page holds (each page's ``common_pid``s, read without decoding) and
    each that announces itself; once listed, their threads are marked in the buffer
    (:class:`MarkingKernelEvents`), so that ``decode`` knows since when the file holds
    each thread's events, as the live view knows since when it watches it."""

    BUFFER = "otel-userevents-kernel"

    def __init__(self, args: argparse.Namespace, reader: TraceReader, tracefs: Tracefs) -> None:
        groups = parse_groups(args.kernel)
        self.events = MarkingKernelEvents(tracefs, reader.decoder.layout, groups)
        self.reader, self.tracefs = reader, tracefs
        self.clock = reader.trace_clock = CLOCK
        self.pages = 0

    def start(self, err: TextIO) -> None:
        events = self.events
        events.layout = self.reader.decoder.layout
        events.start()
        self.reader.on_announced = events.watch_announced
        err.write(f"otel-userevents: {kernel_clock_line(events)}\n")

    def keep(self, writer: TraceDatWriter, pages: list[tuple[int, bytes]]) -> int:
        """List the writers of ``pages``, then keep the kernel's pages so far: how many."""
        events = self.events
        layout = events.layout
        writers: set[int] = set()
        for _cpu, page in pages:
            try:
                parsed = parse_page(page, layout)
            except PageError:
                continue  # kept as it is; decode counts it
            writers.update(_PID(record, 4)[0] for _, record in parsed.events if len(record) >= 8)
        events.watch(writers)
        kept = events.pipes.read(layout.page_size)
        for cpu, page in kept:
            writer.add_page(cpu, page, self.BUFFER)
        self.pages += len(kept)
        return len(kept)

    def formats(self) -> list[tuple[str, str]]:
        """The format files of the events the kernel view's instance enables."""
        tracefs, groups = self.tracefs, self.events.groups
        names = [(SCHED_SYSTEM, SCHED_PROCESS_FORK), (SCHED_SYSTEM, SCHED_PROCESS_EXIT),
                 (FTRACE_SYSTEM, FTRACE_PRINT)]  # fmt: skip
        if "sched" in groups:
            names += [(SCHED_SYSTEM, e) for e in (SCHED_SWITCH, SCHED_WAKEUP, SCHED_WAKEUP_NEW)]
        if "syscalls" in groups:
            names += [(SYSCALLS_SYSTEM, e) for e in tracefs.event_ids(SYSCALLS_SYSTEM).values()]
        formats = []
        for system, name in names:
            try:
                formats.append((system, tracefs.format_text(system, name)))
            except OSError:
                continue  # gone: decode says the group is missing
        return formats

    def close(self) -> None:
        self.events.close()

    def parts(self) -> list[str]:
        events = self.events
        unmarked = f" ({events.unmarked} threads unmarked: no kernel view)" * bool(events.unmarked)
        return [
            f"{self.pages} pages of the kernel's events ({', '.join(events.groups)}) "
            f"of {events.stats.processes} processes in buffer {self.BUFFER}, lost "
            f"{events.pipes.lost}{unmarked}"
        ]


class MarkingKernelEvents(KernelEvents):
    """The kernel view's instance for a capture: each listing of a new process's threads is
    followed by a watch mark in its buffer (``trace_marker``: :data:`.WATCH_MARK` and the
    tids), whose time is when the file begins to hold their events (the kernel's own clock;
    events of theirs between the listing and the mark are before it, and left out by
    ``decode``). A thread of a process listed before is not marked again: its events are
    in the file since its process's mark or its fork (a mark after its exit would read as
    a new thread of that tid)."""

    unmarked = 0
    """Threads listed whose mark could not be written (counted, said at the end)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.processes = self.new_processes = _NewListings()

    def start(self) -> None:
        super().start()
        self._marks = os.open(self.tracefs.trace_marker(self.tracefs_instance.name), os.O_WRONLY)

    def close(self) -> None:
        marks, self._marks = getattr(self, "_marks", -1), -1
        if marks >= 0:
            os.close(marks)
        super().close()

    def _list(self, tids: Iterable[int]) -> list[tuple[int, int, ProcessKey]]:
        watched = super()._list(tids)
        new = self.new_processes.new
        listed = [tid for tid, _since, key in watched if key in new]
        for _tid, _since, key in watched:
            new.pop(key, None)
        for at in range(0, len(listed), TIDS_PER_MARK):
            text = " ".join(map(str, listed[at : at + TIDS_PER_MARK]))
            try:
                os.write(self._marks, WATCH_MARK + text.encode("ascii"))
            except OSError:  # not marked: decode gives its spans no kernel view
                self.unmarked += len(listed[at : at + TIDS_PER_MARK])
        return watched


class _NewListings(ListedProcesses):
    """The processes listed so far, and those just added, until their threads are marked
    (at most :data:`NEW_LISTINGS`: a process whose threads all exited before the listing
    is never marked, and the oldest such is forgotten)."""

    def __init__(self) -> None:
        super().__init__()
        self.new: dict[ProcessKey, None] = {}

    def add(self, key: ProcessKey) -> None:
        super().add(key)
        self.new[key] = None
        if len(self.new) > NEW_LISTINGS:
            del self.new[next(iter(self.new))]
