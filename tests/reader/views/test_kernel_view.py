# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The kernel view on the host: records decoded by the kernel's formats (Linux 6.12, saved
from the test bed), hostile bytes, and what a span gets: its attributes, its waits as
events, the thread it shares (the kernel test proves the figures on both images)."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader.decode.checked_records import CheckedSpan
from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_objects import readable_span
from opentelemetry_exporter_userevents.reader.outputs.exporters.tree_view import TreeView
from opentelemetry_exporter_userevents.reader.views.kernel_events import (
    ClockCheck,
    KernelEvents,
    KernelEventsError,
    parse_groups,
)
from opentelemetry_exporter_userevents.reader.views.kernel_processes import ProcessKey
from opentelemetry_exporter_userevents.reader.views.kernel_view import (
    OFF_CPU_EVENT,
    KernelView,
    kernel_clock_line,
    kernel_parts,
)

DATA = Path(__file__).resolve().parents[2] / "data"
FORMATS = json.loads((DATA / "kernel_formats_6_12.json").read_text())
MS = 1_000_000
T = 4242


class _Formats:
    """The tracefs calls KernelEvents makes to learn formats, from the saved files."""

    def read_format(self, system: str, name: str) -> Any:
        return parse_format(FORMATS[f"{system}/{name}"])

    def event_ids(self, system: str) -> dict[int, str]:
        return {
            parse_format(text).id: key.split("/")[1]
            for key, text in FORMATS.items()
            if key.startswith(system + "/")
        }


def _events() -> KernelEvents:
    events = KernelEvents(_Formats(), PageLayout())  # type: ignore[arg-type]
    events._learn_formats()
    return events


def _record(key: str, **values: int) -> memoryview:
    fmt = parse_format(FORMATS[key])
    size = max(f.offset + f.size for f in fmt.fields) if fmt.fields else 16
    raw = bytearray(max(size, 16))
    struct.pack_into("<Hi", raw, 0, fmt.id, 0)
    struct.pack_into("<i", raw, 4, values.pop("common_pid", 0))
    for name, value in values.items():
        f = fmt.field(name)
        code = {4: "i", 8: "q"}[f.size]
        struct.pack_into("<" + code, raw, f.offset, value)
    return memoryview(bytes(raw))


def _span(start: int, end: int, span_id: int = 1, parent: int | None = None, **attrs: Any):
    return CheckedSpan(
        1, span_id, parent, False, 1, (), "work", 1, 0, "", start, end, dict(attrs), 0,
        [], 0, [], 0, "", None,
    )  # fmt: skip


def _fed() -> KernelEvents:
    events = _events()
    events.timeline.watch(T, 0)
    switch, enter, leave = (
        "sched/sched_switch",
        "syscalls/sys_enter_futex",
        "syscalls/sys_exit_futex",
    )
    events.feed([
        (1 * MS, _record(switch, prev_pid=1, prev_state=1, next_pid=T)),
        (2 * MS, _record(enter, common_pid=T)),
        (3 * MS, _record(switch, prev_pid=T, prev_state=1, next_pid=1)),
        (40 * MS, _record("sched/sched_wakeup", common_pid=77, pid=T)),
        (41 * MS, _record(switch, prev_pid=1, prev_state=1, next_pid=T)),
        (42 * MS, _record(leave, common_pid=T)),
        (43 * MS, _record("sched/sched_process_fork", common_pid=T, parent_pid=T, child_pid=T + 1)),
    ])  # fmt: skip
    return events


def test_a_span_gets_its_threads_kernel_view_and_the_apps_own_attributes_win():
    events = _fed()
    assert events.timeline.watched(T + 1)  # its new thread, from the fork event
    view = KernelView(events, wait_threshold_ns=10 * MS)
    span = view(_span(0, 50 * MS, **{"linux.sched.on_cpu_ns": "mine"}), T)
    attrs = span.attributes
    assert attrs["linux.thread.id"] == T and "thread.id" not in attrs
    assert attrs["linux.sched.on_cpu_ns"] == "mine"
    assert attrs["linux.kernel.view"] == "partial"  # 0 to 1 ms: no event says what it did
    assert attrs["linux.sched.off_cpu_ns"] == 38 * MS  # asleep 37 ms, then waiting for a CPU
    assert (attrs["linux.sched.sleeping_ns"], attrs["linux.sched.runnable_ns"]) == (37 * MS, MS)
    assert attrs["linux.syscall.top.name"] == ["futex"]
    assert attrs["linux.syscall.top.count"] == [1]
    assert attrs["linux.syscall.time_ns"] == 40 * MS
    (wait,) = span.events
    assert wait.name == OFF_CPU_EVENT and wait.time_ns == 3 * MS
    assert wait.attributes == {
        "linux.sched.state": "sleeping", "linux.sched.off_cpu_ns": 38 * MS,
        "linux.sched.runnable_ns": MS, "linux.syscall.name": "futex",
        "linux.sched.waker.tid": 77,
    }  # fmt: skip
    assert view(_span(MS, 50 * MS, span_id=2), T).attributes["linux.kernel.view"] == "whole"


IDENT = 139_872_386_463_296
"""A Python ``threading.get_ident()`` (a pthread_t): the semantic conventions' ``thread.id``."""


def _app_and_neighbour() -> tuple[KernelEvents, KernelView]:
    events = _fed()
    app, neighbour = ProcessKey(T, 1), ProcessKey(5000, 2)
    events.timeline.watch(T, 0, app)
    events.timeline.watch(T + 2, 0, app)  # the app's batch thread
    events.timeline.watch(5000, 0, neighbour)
    return events, KernelView(events)


def test_an_apps_thread_id_is_its_own_never_read_as_an_os_thread():
    _, view = _app_and_neighbour()
    assert view(_span(0, MS), 999).attributes["linux.kernel.view"] == "none"
    for n, ident in enumerate((IDENT, T + 2, True)):  # T + 2: a thread of its own process
        attrs = view(_span(MS, 2 * MS, span_id=10 + n, **{"thread.id": ident}), T).attributes
        assert attrs["thread.id"] is ident  # the app's, kept as it set it
        assert attrs["linux.thread.id"] == T  # summed over the thread that wrote it
        assert (attrs["linux.kernel.view"], attrs["linux.sched.on_cpu_ns"]) == ("whole", MS)
    assert "thread.id" not in view(_span(MS, 2 * MS, span_id=20), T).attributes
    assert view.stats.threads_refused == 0


def test_a_linux_thread_id_of_the_writers_process_is_summed_over_and_another_is_refused():
    _, view = _app_and_neighbour()
    moved = view(_span(MS, 2 * MS, **{"linux.thread.id": T}), T + 2).attributes  # batch thread
    assert (moved["linux.thread.id"], moved["linux.sched.on_cpu_ns"]) == (T, MS)
    assert moved["linux.kernel.view"] == "whole"
    assert view.stats.threads_refused == 0
    stolen = view(_span(MS, 2 * MS, span_id=2, **{"linux.thread.id": T}), 5000)  # not its own
    # Its own writer's figures (nothing known of 5000), not the app's thread's on-CPU ms;
    # its linux.thread.id stays as it set it, as every attribute an app sets.
    assert (stolen.attributes["linux.sched.on_cpu_ns"], stolen.attributes["linux.thread.id"]) == (
        0, T,
    )  # fmt: skip
    assert stolen.attributes["linux.kernel.unknown_ns"] == MS
    assert view.stats.threads_refused == 1
    assert "1 spans naming a linux.thread.id not of their writer's process (refused)" in (
        kernel_parts(view)
    )


def test_overlapping_spans_on_one_thread_that_are_not_nested_are_called_shared():
    view = KernelView(_fed())
    child = view(_span(10 * MS, 20 * MS, span_id=2, parent=1), T)
    parent = view(_span(5 * MS, 30 * MS, span_id=1), T)
    assert "linux.thread.shared" not in child.attributes
    assert "linux.thread.shared" not in parent.attributes
    other = view(_span(25 * MS, 45 * MS, span_id=3), T)  # another task, interleaved
    assert other.attributes["linux.thread.shared"] is True


def test_lost_events_make_spans_that_overlap_them_partial():
    events = _fed()
    events.losses.append((20 * MS, 25 * MS))
    view = KernelView(events)
    assert view(_span(21 * MS, 30 * MS), T).attributes["linux.kernel.view"] == "partial"
    assert view(_span(26 * MS, 30 * MS, span_id=2), T).attributes["linux.kernel.view"] == "whole"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**12), st.binary(max_size=80)), max_size=40))
def test_hostile_records_are_counted_never_raised(records):
    """Any bytes in the kernel instance's pages (a listed process shapes its own syscalls'
    timing, not their bytes, but the decoder must not care)."""
    events = _events()
    events.timeline.watch(T, 0)
    ids = list(events._decoders)
    shaped = [(ts, memoryview(raw)) for ts, raw in sorted(records)]
    shaped += [(10**12 + n, memoryview(struct.pack("<H", ids[n % len(ids)]) + raw))
               for n, (_, raw) in enumerate(records)]  # fmt: skip
    decoded = events.feed(shaped)
    assert decoded + events.stats.undecodable == len(shaped)
    assert KernelView(events)(_span(0, 10**13), T).attributes["linux.thread.id"] == T


def test_groups_are_checked():
    assert parse_groups("sched, syscalls,sched") == ("sched", "syscalls")
    with pytest.raises(ValueError, match="unknown kernel group io"):
        parse_groups("sched,io")


def test_the_tree_view_shows_the_kernel_view_at_a_glance_and_escapes_what_apps_set():
    app = _span(MS, 50 * MS, **{"k": "v", "thread.id": IDENT})
    enriched = KernelView(_fed(), wait_threshold_ns=10 * MS)(app, T)
    hostile = _span(0, MS, span_id=3, **{"linux.kernel.view": "whole",
                                          "linux.syscall.top.name": ["\x1b[2Jx"],
                                          "linux.syscall.top.count": ["many"],
                                          "linux.syscall.top.time_ns": [1]})  # fmt: skip
    out = io.StringIO()
    view = TreeView(out)
    for checked in (enriched, hostile):
        view.add([readable_span(checked, Resource({"service.name": "s"}), None)])
    view.flush()
    text = out.getvalue()
    assert "k=v" in text and "linux.sched" not in text and "linux.thread.id" not in text
    assert f"thread.id={IDENT}" in text  # the app's own, shown as its other attributes
    assert "⚙ on-CPU 11.000 ms, off-CPU 38.000 ms (runnable 1.000 ms, sleeping 37.000 ms)" in text
    assert "switches 1+0, 1 syscalls 40.000 ms: futex 1 40.000 ms" in text
    assert "◦ " in text and "off-CPU 38.000 ms sleeping in futex, woken by 77" in text
    assert "\x1b" not in text and "\\x1b[2Jx ? 0.0 µs" in text


def test_the_clock_line_says_a_coarse_clocksource():
    events = _events()
    events.clock = ClockCheck(0, 16, 16, 0, 600_000, "refined-jiffies")
    line = kernel_clock_line(events)
    assert "16 of 16 clock checks within their 600.0 µs windows" in line
    assert "clocksource refined-jiffies (coarse" in line
    events.clock = ClockCheck(37_000_000_000, 16, 15, 2_000, 600_000, "tsc")
    line = kernel_clock_line(events)
    assert "37 s from CLOCK_REALTIME" in line and "the worst 2.0 µs outside" in line
    assert "coarse" not in line


def test_a_kernel_without_the_events_gets_a_clear_error(tmp_path, monkeypatch):
    class NoSched(_Formats):
        def read_format(self, system: str, name: str) -> Any:
            raise FileNotFoundError(2, "No such file or directory", f"events/{system}/{name}")

    monkeypatch.setattr(f"{KernelEvents.__module__}.host_pid_namespace_error", lambda path: None)
    events = KernelEvents(NoSched(), PageLayout())  # type: ignore[arg-type]
    events.tracefs_instance.create = lambda: None  # type: ignore[method-assign]
    events.tracefs.trace_clocks = lambda name: ["local", "tai"]  # type: ignore[attr-defined]
    events.tracefs.set_trace_clock = lambda name, clock: None  # type: ignore[attr-defined]
    events.tracefs.set_buffer_size_kb = lambda name, kb: None  # type: ignore[attr-defined]
    events.tracefs.set_option = lambda name, option, on: None  # type: ignore[attr-defined]
    events.tracefs.cpus = lambda name: []  # type: ignore[attr-defined]
    with pytest.raises(KernelEventsError, match="cannot trace the kernel's events: .*sched"):
        events.start()
