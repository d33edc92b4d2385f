# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's commands stop between two steps: a signal that arrives while a step holds
records it took from the kernel's buffer must not lose them."""

from __future__ import annotations

import signal

import pytest

from opentelemetry_exporter_userevents.reader.commands.common import (
    run_until_stopped,
    stop_signals,
)


@pytest.mark.parametrize(
    ("signum", "reason"),
    [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP")],
)
def test_a_signal_inside_a_step_lets_it_finish_and_stops_after_it(signum, reason):
    handed_on: list[int] = []
    steps = 0

    def step() -> bool:
        nonlocal steps
        steps += 1
        taken = [1, 2, 3]  # records already out of the kernel's buffer
        if steps == 2:
            signal.raise_signal(signum)
        handed_on.extend(taken)
        return True

    with stop_signals() as stop:
        stopped = run_until_stopped(step, None, stop)
    assert stopped == reason
    assert steps == 2 and handed_on == [1, 2, 3] * 2


def test_a_second_ctrl_c_interrupts_and_the_handlers_are_restored():
    before = signal.getsignal(signal.SIGINT)

    def step() -> bool:
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)  # a step that would not return
        return True

    with pytest.raises(KeyboardInterrupt):
        with stop_signals() as stop:
            run_until_stopped(step, None, stop)
    assert signal.getsignal(signal.SIGINT) is before


def test_the_deadline_stops_it_when_no_signal_came():
    with stop_signals() as stop:
        assert run_until_stopped(lambda: True, 0.0, stop) == "duration"
    assert stop.reason is None
