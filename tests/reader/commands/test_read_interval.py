# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record`` rests its read interval between reads that found little, in slices that a stop
signal ends, and reads at once when the reader's wait says there is something to read
(``run_until_stopped``); :meth:`.TraceReader.wait` stops watching a buffer that polls
readable and then gives nothing (the kernel's watermark is tested in
tests/kernel/test_read_wakeup.py)."""

from __future__ import annotations

import time

from opentelemetry_exporter_userevents.reader.commands.common import (
    POLL_INTERVAL,
    StopSignals,
    run_until_stopped,
)
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from tests.reader.live.test_cpu_pipes import FakeInstance, pipes_of


def _steps(stop: StopSignals, count: int, busy: bool = False):
    """A step that is never busy (unless ``busy``), and notes a stop at its ``count``th call."""
    calls: list[float] = []

    def step() -> bool:
        calls.append(time.monotonic())
        if len(calls) == count:
            stop.reason = "interrupted"
        return busy

    return step, calls


def test_an_idle_reader_rests_its_whole_interval_in_slices():
    stop = StopSignals()
    step, steps = _steps(stop, 2)
    slices: list[float] = []
    reason = run_until_stopped(step, None, stop, lambda s: slices.append(s) or time.sleep(s), 0.5)
    assert reason == "interrupted" and len(steps) == 2
    assert steps[1] - steps[0] >= 0.5 and len(slices) >= 3  # 0.5 s in slices of 0.2 at most
    assert max(slices) <= POLL_INTERVAL


def test_a_wake_ends_the_rest_at_once():
    stop = StopSignals()
    step, steps = _steps(stop, 3)
    slices: list[float] = []
    assert run_until_stopped(step, None, stop, lambda s: slices.append(s) or True, 3600) == (
        "interrupted"
    )
    assert len(steps) == 3 and len(slices) == 2  # one slice between two steps


def test_a_stop_noted_while_resting_ends_the_rest_at_the_next_slice():
    stop = StopSignals()
    step, steps = _steps(stop, 0)

    def idle(seconds: float) -> None:
        stop.reason = "SIGTERM"

    assert run_until_stopped(step, None, stop, idle, 3600) == "SIGTERM" and len(steps) == 2


def test_the_rest_ends_at_the_deadline():
    stop = StopSignals()
    step, _steps_taken = _steps(stop, 0)
    slices: list[float] = []
    deadline = time.monotonic() + 0.3
    reason = run_until_stopped(
        step, deadline, stop, lambda s: slices.append(s) or time.sleep(s), 60
    )
    assert reason == "duration" and sum(slices) <= 0.3


def test_a_busy_step_is_followed_by_another_without_rest():
    stop = StopSignals()
    step, steps = _steps(stop, 3, busy=True)
    assert run_until_stopped(step, None, stop, lambda s: 1 / 0, 3600) == "interrupted"
    assert len(steps) == 3


def test_a_buffer_that_polls_readable_and_gives_nothing_is_not_watched_again(tmp_path):
    """A regular file polls readable whatever it holds, as a buffer past its watermark:
    the first wait ends at once; the read after it finds nothing, so the next wait rests
    its whole time; once a read gives more than a page a CPU, the buffers are watched
    again."""
    fake = FakeInstance(tmp_path, cpus=1)
    reader = TraceReader(fake.tracefs, "p", hold=False)
    reader.pipes = pipes_of(fake)
    try:
        assert reader.wait(60) is True
        assert reader.pipes.read(64) == []
        assert reader.wait(0.05) is False  # not watched: rested its time
        fake.pages(0, 3)
        assert len(reader.pipes.read(64)) == 3
        assert reader.wait(60) is True  # watched again
    finally:
        reader.pipes.close()
