# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record --capture --kernel`` marks when each thread's watching began (a
``trace_marker`` record in the kernel view's instance buffer); ``decode --kernel`` watches a
thread from its mark, so a span that began before it is ``partial``, said once, never whole
with the kernel's events before the listing missing from its figures."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader.capture import TraceDatWriter
from opentelemetry_exporter_userevents.reader.commands.capture_kernel import (
    NEW_LISTINGS,
    MarkingKernelEvents,
)
from opentelemetry_exporter_userevents.reader.views.kernel_capture import MARK_TIDS, WATCH_MARK
from opentelemetry_exporter_userevents.reader.views.kernel_processes import ProcessKey
from tests.reader.capture.test_capture import FORMATS, RESOURCE_ID, _resource_payload
from tests.reader.capture.test_capture_kernel import (
    BUFFER,
    KERNEL,
    MS,
    OFFSET,
    S,
    T,
    _decode,
    _kernel,
    _kernel_formats,
    _span_record,
)
from tests.reader.views.test_kernel_view_bounds import _listing, _Tracefs
from tests.support.captures import HEADER_EVENT
from tests.support.pages import HEADER_PAGE, data_event, page, record

OTHER = 5
"""A thread of a process listed before the span's."""


def _mark(*tids: int, text: bytes | None = None) -> bytes:
    """A ``trace_marker`` record (``ftrace/print``) as the reader writes it."""
    fmt = parse_format(KERNEL["ftrace/print"])
    body = WATCH_MARK + " ".join(map(str, tids)).encode() if text is None else text
    return struct.pack("<Hxxi", fmt.id, 1) + bytes(8) + body + b"\n\0"


def _capture(tmp_path: Path, marked_at: int, mark: bytes | None = None) -> str:
    """Both buffers on ``tai``: another process watched since before the span on both CPUs;
    T marked at ``marked_at``, then preempted for 1 ms at S+8ms, a pread at S+10ms; its span
    [S, S+20ms]."""
    _, resource = _resource_payload()
    switch = "sched/sched_switch"
    kernel = [
        (1, S - 3 * MS, _mark(OTHER)),
        (1, S - 3 * MS + 1, _kernel(switch, 0, prev_pid=0, prev_state=0, next_pid=OTHER)),
        (0, S - 1 * MS, _kernel(switch, OTHER, prev_pid=OTHER, prev_state=1, next_pid=0)),
        (0, marked_at, mark or _mark(T)),
        (0, S + 8 * MS, _kernel(switch, T, prev_pid=T, prev_state=0, next_pid=0)),
        (0, S + 9 * MS, _kernel(switch, 0, prev_pid=0, prev_state=0, next_pid=T)),
        (0, S + 10 * MS, _kernel("syscalls/sys_enter_pread64")),
        (0, S + 11 * MS, _kernel("syscalls/sys_exit_pread64")),
    ]
    ours = [(0, S - 2 * MS, record(RESOURCE_ID, resource, pid=T)), (0, S + 21 * MS, _span_record())]
    path = str(tmp_path / "marked.dat")
    writer = TraceDatWriter(path, 4096, HEADER_PAGE, HEADER_EVENT, "tai")
    for events, buffer in ((kernel, BUFFER), (ours, "")):
        for cpu, when, raw in events:
            writer.add_page(cpu, page(when + OFFSET, [data_event(0, raw)]), buffer)
    for system, text in FORMATS + _kernel_formats():
        writer.add_format(system, text)
    writer.close()
    return path


def test_a_span_that_began_before_its_thread_was_marked_is_partial_said_once(tmp_path, capsys):
    got, err = _decode(_capture(tmp_path, S + 6 * MS), capsys)

    assert got["linux.kernel.view"] == "partial", (got, err)
    said = [line for line in err.splitlines() if "before its thread was watched" in line]
    assert said == [
        "otel-userevents: kernel view: 1 spans partial: started before its thread was "
        "watched (listed for the kernel view)"
    ], err
    assert got["linux.sched.on_cpu_ns"] == 2 * MS + 11 * MS  # from the mark on, not before


def test_a_span_after_its_threads_mark_is_whole_and_exact(tmp_path, capsys):
    got, err = _decode(_capture(tmp_path, S - MS // 2), capsys)

    assert got["linux.kernel.view"] == "whole", (got, err)
    assert got["linux.sched.on_cpu_ns"] == 19 * MS and got["linux.sched.runnable_ns"] == MS
    assert got["linux.sched.switches.involuntary"] == 1
    assert "partial" not in err.split("kernel view of 1 spans (0 partial", 1)[1], err


def test_a_thread_never_marked_gets_no_kernel_view_though_others_name_it(tmp_path, capsys):
    got, err = _decode(_capture(tmp_path, S - MS // 2, _mark(OTHER)), capsys)

    assert got["linux.kernel.view"] == "none", (got, err)


def test_a_mark_is_read_for_at_most_mark_tids_threads_and_hostile_ones_are_skipped(
    tmp_path, capsys
):
    hostile = WATCH_MARK + b"x -3 99999999999999 \xff " + b"1 " * MARK_TIDS + str(T).encode()
    got, err = _decode(_capture(tmp_path, S - MS // 2, _mark(text=hostile)), capsys)
    assert got["linux.kernel.view"] == "none", (got, err)  # T came after the bound

    again = tmp_path / "again"
    again.mkdir()
    within = WATCH_MARK + b"x -3 99999999999999 \xff " + str(T).encode()
    got, err = _decode(_capture(again, S - MS // 2, _mark(text=within)), capsys)
    assert got["linux.kernel.view"] == "whole", (got, err)


def test_the_reader_marks_each_new_process_once_not_a_later_thread_of_a_listed_one(
    monkeypatch,
):
    """A thread started after its process was listed (its span's record read later) is in
    the file since its fork: a second mark would, after its exit, read as a new thread."""
    key = ProcessKey(100, 1)
    _listing(monkeypatch, {100: key, 101: key, 200: ProcessKey(200, 1)})
    tracefs = _Tracefs()
    events = MarkingKernelEvents(tracefs, PageLayout())  # type: ignore[arg-type]
    events._learn_formats()
    read, events._marks = os.pipe()
    try:
        events.watch([100])
        events.watch([101])  # listed already, as a thread of 100
        events.watch([200])
        os.close(events._marks)
        marks = os.read(read, 1 << 16)
    finally:
        os.close(read)
    assert tracefs.listed == [[100], [200]]
    assert marks == WATCH_MARK + b"100" + WATCH_MARK + b"200"
    assert events.unmarked == 0


def test_processes_listed_and_not_yet_marked_are_bounded():
    events = MarkingKernelEvents(_Tracefs(), PageLayout())  # type: ignore[arg-type]
    for pid in range(1, NEW_LISTINGS + 100):
        events.new_processes.add(ProcessKey(pid, 1))  # listed, never marked (threads gone)
    assert len(events.new_processes.new) == NEW_LISTINGS
    assert ProcessKey(NEW_LISTINGS + 99, 1) in events.new_processes.new  # the oldest went
