# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The per-process budget of kernel events under a syscall storm: the storm's events past
its bucket are counted, not kept, and its spans over them are partial; a quiet app beside
it keeps every event and exact, whole spans (the kernel test shows the same live)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

from opentelemetry_exporter_userevents.reader.outputs import health_metrics as hm
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import OutputStage
from opentelemetry_exporter_userevents.reader.views import kernel_event_budget as budget_module
from opentelemetry_exporter_userevents.reader.views import kernel_pauses
from opentelemetry_exporter_userevents.reader.views.kernel_event_budget import (
    MAX_PROCESS_EVENTS,
    EventBudget,
)
from opentelemetry_exporter_userevents.reader.views.kernel_processes import ProcessKey
from opentelemetry_exporter_userevents.reader.views.kernel_timeline import KernelTimeline
from opentelemetry_exporter_userevents.reader.views.kernel_view import KernelView, kernel_parts
from tests.reader.views.test_kernel_view import _events, _record, _span

MS = 1_000_000
US = 1_000
APP, STORM = ProcessKey(100, 7), ProcessKey(200, 9)
APP_TID, STORM_TID, CHILD_TID = 100, 200, 201
BUDGET = 1000
"""Events per process at once and per second, in these tests (the default is larger)."""
SWITCH = "sched/sched_switch"
ENTER, EXIT = "syscalls/sys_enter_pread64", "syscalls/sys_exit_pread64"


def _storm(start: int, end: int, tid: int, every: int = 15 * US) -> list[tuple[int, Any]]:
    """A thread looping on ``pread``: an entry and an exit every ``every`` ns."""
    out = []
    for at in range(start, end, every):
        out.append((at, _record(ENTER, common_pid=tid)))
        out.append((at + every // 3, _record(EXIT, common_pid=tid)))
    return out


def _app() -> list[tuple[int, Any]]:
    """A quiet app: asleep from 1 ms, on the CPU from 10.5 ms to 19 ms with one syscall."""
    return [
        (1 * MS, _record(SWITCH, prev_pid=APP_TID, prev_state=1, next_pid=1)),
        (10 * MS + 500 * US, _record(SWITCH, prev_pid=1, prev_state=1, next_pid=APP_TID)),
        (11 * MS, _record(ENTER, common_pid=APP_TID)),
        (12 * MS, _record(EXIT, common_pid=APP_TID)),
        (19 * MS, _record(SWITCH, prev_pid=APP_TID, prev_state=1, next_pid=1)),
    ]


def _fed(per_process: int = BUDGET) -> Any:
    events = _events()
    events.timeline = KernelTimeline(budget=EventBudget(per_process))
    events.timeline.watch(APP_TID, 0, APP)
    events.timeline.watch(STORM_TID, 0, STORM)
    storm_on = [(100 * US, _record(SWITCH, prev_pid=1, prev_state=0, next_pid=STORM_TID))]
    records = sorted(_app() + storm_on + _storm(200 * US, 30 * MS, STORM_TID),
                     key=lambda item: item[0])  # fmt: skip
    events.feed(records)
    return events


def test_a_storm_past_its_budget_is_counted_not_kept_and_its_spans_are_partial():
    events = _fed()
    timeline, budget = events.timeline, events.timeline.budget
    storm_events = 2 * len(range(200 * US, 30 * MS, 15 * US))
    kept = BUDGET + 30 * BUDGET // 1000  # the bucket, and its refill over the 30 ms
    assert storm_events - kept - 2 <= budget.dropped <= storm_events - BUDGET + 1
    view = KernelView(events)
    storm = view(_span(5 * MS, 25 * MS), STORM_TID).attributes
    assert storm["linux.kernel.view"] == "partial"
    assert storm["linux.kernel.unknown_ns"] > 15 * MS  # from the first dropped event on
    assert storm["linux.sched.on_cpu_ns"] + storm["linux.kernel.unknown_ns"] == 20 * MS
    assert timeline.summary(STORM_TID, 0, 30 * MS, MS).scanned <= kept  # type: ignore[union-attr]
    line = ", ".join(kernel_parts(view))
    assert f"{budget.dropped} kernel events over their process's budget" in line, line
    assert f"pid {STORM.pid} {budget.dropped}" in line, line


def test_a_quiet_app_beside_a_storm_keeps_every_event_and_its_spans_whole_and_exact():
    events = _fed()
    app = KernelView(events)(_span(10 * MS, 20 * MS), APP_TID).attributes
    assert app["linux.kernel.view"] == "whole", app
    assert app["linux.sched.on_cpu_ns"] == 8 * MS + 500 * US
    assert app["linux.sched.sleeping_ns"] == 1 * MS + 500 * US
    assert app["linux.syscall.top.name"] == ["pread64"]
    assert app["linux.syscall.top.count"] == [1]
    assert "linux.kernel.unknown_ns" not in app
    assert [key for key, _ in events.timeline.budget.by_process()] == [STORM]


def test_the_bucket_refills_with_the_events_time_and_a_span_after_the_next_switch_is_whole():
    events = _fed()
    timeline = events.timeline
    dropped = timeline.budget.dropped
    later = [  # two seconds on (the bucket is full again): off the CPU, back, a syscall
        (2030 * MS, _record(SWITCH, prev_pid=STORM_TID, prev_state=1, next_pid=1)),
        (2031 * MS, _record(SWITCH, prev_pid=1, prev_state=1, next_pid=STORM_TID)),
        (2032 * MS, _record(ENTER, common_pid=STORM_TID)),
        (2033 * MS, _record(EXIT, common_pid=STORM_TID)),
    ]
    events.feed(later)
    assert timeline.budget.dropped == dropped
    view = KernelView(events)
    after = view(_span(2031 * MS, 2035 * MS), STORM_TID).attributes
    assert after["linux.kernel.view"] == "whole", after
    assert after["linux.syscall.count"] == 1
    across = view(_span(25 * MS, 2031 * MS, span_id=2), STORM_TID).attributes
    assert across["linux.kernel.view"] == "partial"  # unknown until its next switch


def test_threads_and_children_a_storm_starts_share_its_bucket():
    events = _events()
    events.timeline = KernelTimeline(budget=EventBudget(BUDGET))
    events.timeline.watch(STORM_TID, 0, STORM)
    fork = "sched/sched_process_fork"
    records = [(50 * US, _record(fork, common_pid=STORM_TID, parent_pid=STORM_TID,
                                 child_pid=CHILD_TID))]  # fmt: skip
    records += _storm(100 * US, 10 * MS, CHILD_TID)
    events.feed(sorted(records, key=lambda item: item[0]))
    budget = events.timeline.budget
    assert budget.dropped > 0
    assert budget.by_process() == [(STORM, budget.dropped)]


def test_a_churners_threads_make_no_bucket_of_their_own():
    """Each thread a watched one starts is charged to its parent's bucket: thousands of
    them do not fill the budget's buckets and push another process's out."""
    events = _events()
    events.timeline = KernelTimeline(budget=EventBudget(BUDGET))
    events.timeline.watch(STORM_TID, 0, STORM)
    fork = "sched/sched_process_fork"
    events.feed([(n * US, _record(fork, common_pid=STORM_TID, parent_pid=STORM_TID,
                                  child_pid=1000 + n)) for n in range(1, 100)])  # fmt: skip
    assert list(events.timeline.budget._accounts) == [STORM]  # noqa: SLF001 - what is kept


def test_buckets_are_bounded_and_the_counts_of_the_most_dropped_are_named(monkeypatch):
    monkeypatch.setattr(budget_module, "MAX_ACCOUNTS", 4)
    budget = EventBudget(per_process=1)
    for pid in range(1, 20):
        account = budget.account(ProcessKey(pid, 1))
        account.left = 0
        for _ in range(pid):
            budget.refill(account, 0)
    assert len(budget._accounts) == 4  # noqa: SLF001 - the bound itself
    shown = budget.by_process()
    assert budget.dropped == sum(range(1, 20))
    assert sum(count for _, count in shown) == budget.dropped  # the rest as "others"
    assert shown[0] == (ProcessKey(19, 1), 19) and shown[-1][0] is None


def test_budget_constants_are_what_the_docs_say():
    assert MAX_PROCESS_EVENTS == 100_000
    assert KernelTimeline().budget.per_process == MAX_PROCESS_EVENTS


def test_the_health_metrics_count_the_dropped_events_by_process(tmp_path):
    class Output:
        failed, sdk_objects = 0, False

        def write(self, items: Any) -> None:
            pass

        def close(self) -> None:
            pass

    events = _fed()
    reader = SimpleNamespace(decoder=SimpleNamespace(stats=SimpleNamespace(
        records=1, undecodable=0)), lost=0)  # fmt: skip
    join_stage = SimpleNamespace(stats=SimpleNamespace(invalid_reasons={}),
                                span_enricher=KernelView(events))  # fmt: skip
    stage = OutputStage(Output(), 0.1)
    health = hm.gather(reader, join_stage, stage, 5)
    stage.close()
    dropped = events.timeline.budget.dropped
    assert health.kernel_dropped == {str(STORM.pid): dropped}
    points = {(p.name, tuple(p.point.attributes.items())): p.point.value
              for p in hm.health_points(health)}  # fmt: skip
    name = "otel_userevents.reader.kernel_events.dropped"
    assert points[(name, (("process.pid", STORM.pid),))] == dropped
    assert f"  kernel events over budget (pid {STORM.pid}): {dropped}" in hm.health_lines(health)
    hm.write_health_file(str(tmp_path), health)
    assert hm.read_health_file(str(tmp_path)) == health
    (tmp_path / hm.HEALTH_FILE).write_text(json.dumps({"kernel_dropped": {"1": "x"}}))
    assert hm.read_health_file(str(tmp_path)) is None  # a file not of ours: refused


class _Notrace:
    """The instance's ``set_event_notrace_pid``, as written; refusing when told to."""

    def __init__(self) -> None:
        self.writes: list[list[int]] = []
        self.refuse = False

    def __call__(self, tids: list[int]) -> None:
        if self.refuse:
            raise OSError(2, "No such file or directory")  # a kernel before 5.8
        self.writes.append(list(tids))


def test_a_process_over_its_budget_is_left_out_of_the_kernels_events_for_a_second(
    monkeypatch,
):
    events = _fed(per_process=10**9)  # the feed above fits: the reads below overflow
    events.timeline.budget.per_process = BUDGET
    events.timeline.budget.account(STORM).left = 0
    notrace = _Notrace()
    events.pauses = kernel_pauses.Pauses(notrace)
    events.leave_out_over_budget()
    now = [40 * MS]
    monkeypatch.setattr(time, "time_ns", lambda: now[0])
    monkeypatch.setattr(time, "clock_gettime_ns", lambda clock_id: 2**62)  # all read now
    storm = _storm(31 * MS, 35 * MS, STORM_TID)
    monkeypatch.setattr(events, "_read_records", lambda: storm)
    events.read()
    assert notrace.writes == [[STORM_TID]]  # the storm's thread, not the app's
    assert list(events.pauses.paused) == [STORM]
    view = KernelView(events)
    after = view(_span(40 * MS, 60 * MS), STORM_TID).attributes
    assert after["linux.kernel.view"] == "partial" and after["linux.kernel.unknown_ns"] == 20 * MS
    assert view(_span(10 * MS, 20 * MS, span_id=2), APP_TID).attributes["linux.kernel.view"] == (
        "whole"
    )
    assert "1 times a process over its budget was left out" in ", ".join(kernel_parts(view))
    storm[:] = [  # while it is out: a switch to the app still comes, and changes nothing
        (41 * MS, _record(SWITCH, prev_pid=STORM_TID, prev_state=1, next_pid=APP_TID)),
        (42 * MS, _record(SWITCH, prev_pid=APP_TID, prev_state=1, next_pid=STORM_TID)),
    ]
    now[0] = 40 * MS + kernel_pauses.PAUSE_NS - 1
    events.read()
    assert len(notrace.writes) == 1  # not yet
    assert view(_span(40 * MS, 60 * MS, span_id=3), STORM_TID).attributes[
        "linux.kernel.unknown_ns"] == 20 * MS  # fmt: skip
    storm.clear()
    now[0] += 1
    events.read()
    assert notrace.writes[-1] == [] and not events.pauses.paused  # recorded again
    assert not events.timeline.budget.account(STORM).closed


def test_a_kernel_that_refuses_the_list_leaves_the_budget_to_drop_the_storm(monkeypatch):
    events = _fed()
    notrace = _Notrace()
    notrace.refuse = True
    events.pauses = kernel_pauses.Pauses(notrace)
    events.leave_out_over_budget()
    monkeypatch.setattr(time, "clock_gettime_ns", lambda clock_id: 2**62)
    monkeypatch.setattr(events, "_read_records", lambda: _storm(31 * MS, 35 * MS, STORM_TID))
    dropped = events.timeline.budget.dropped
    events.read()
    assert events.pauses.failed == 1 and not events.pauses.paused
    assert events.timeline.budget.dropped > dropped
    assert "1 times the kernel did not take the list" in ", ".join(kernel_parts(KernelView(events)))


def test_a_process_over_its_budget_again_soon_after_is_left_out_twice_as_long_each_time():
    notrace = _Notrace()
    pauses = kernel_pauses.Pauses(notrace)
    second, now, lengths = kernel_pauses.PAUSE_NS, 0, []
    for _ in range(9):
        assert pauses.pause(STORM, [STORM_TID], now)
        until = pauses.paused[STORM][0]
        lengths.append((until - now) // second)
        assert pauses.resume(until - 1) == []
        assert pauses.resume(until) == [STORM]
        now = until + 1  # over its budget again at once
    assert lengths == [1, 2, 4, 8, 16, 32, 64, 64, 64]
    assert pauses.pause(STORM, [STORM_TID], now + 65 * second)  # calm a while: a second
    assert pauses.paused[STORM][0] == now + 66 * second
    assert pauses.count == 10 and notrace.writes[-1] == [STORM_TID]


def test_a_process_comes_back_only_once_the_reader_has_caught_up():
    pauses = kernel_pauses.Pauses(_Notrace())
    assert pauses.pause(STORM, [STORM_TID], 0)
    over = kernel_pauses.PAUSE_NS
    assert pauses.resume(over, last_read=kernel_pauses.CAUGHT_UP) == []  # still behind
    assert pauses.resume(over, last_read=kernel_pauses.CAUGHT_UP - 1) == [STORM]


def test_a_process_whose_bucket_is_forgotten_while_it_is_out_comes_back_whole(monkeypatch):
    """While a process is left out, other processes' buckets push its bucket out of the
    budget's (:data:`.MAX_ACCOUNTS`): when it comes back, the bucket its threads hold is
    open again, so its events are summed once more, not dropped for ever."""
    monkeypatch.setattr(budget_module, "MAX_ACCOUNTS", 4)
    events = _fed(per_process=10**9)
    budget = events.timeline.budget
    budget.per_process = BUDGET
    budget.account(STORM).left = 0
    events.pauses = kernel_pauses.Pauses(_Notrace())
    events.leave_out_over_budget()
    now = [40 * MS]
    monkeypatch.setattr(time, "time_ns", lambda: now[0])
    monkeypatch.setattr(time, "clock_gettime_ns", lambda clock_id: 2**62)
    storm = _storm(31 * MS, 35 * MS, STORM_TID)
    monkeypatch.setattr(events, "_read_records", lambda: storm)
    events.read()
    assert list(events.pauses.paused) == [STORM]
    for pid in range(300, 310):  # other processes' buckets: the storm's is forgotten
        budget.account(ProcessKey(pid, 1))
    assert STORM not in budget._accounts  # noqa: SLF001 - the case under test
    storm.clear()
    now[0] += kernel_pauses.PAUSE_NS
    events.read()
    assert not events.pauses.paused
    dropped = budget.dropped
    storm[:] = [  # two seconds on: its bucket refilled, it runs and makes a syscall
        (2030 * MS, _record(SWITCH, prev_pid=1, prev_state=1, next_pid=STORM_TID)),
        (2031 * MS, _record(ENTER, common_pid=STORM_TID)),
        (2032 * MS, _record(EXIT, common_pid=STORM_TID)),
        (2033 * MS, _record(SWITCH, prev_pid=STORM_TID, prev_state=1, next_pid=1)),
    ]
    events.read()
    assert budget.dropped == dropped  # taken, not dropped by a bucket left closed
    after = KernelView(events)(_span(2030 * MS, 2033 * MS, span_id=4), STORM_TID).attributes
    assert after["linux.kernel.view"] == "whole", after
    assert after["linux.syscall.top.name"] == ["pread64"], after
