# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The rescan's change signal on a real kernel (``live/new_tracepoint_signal.py``): a probe
of its own says whether another process made a multi-format tracepoint since the last
look, and no probe is left behind; without MULTI_FORMAT there is no signal, and it says
why."""

from __future__ import annotations

import os

import pytest

from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM
from opentelemetry_exporter_userevents.reader.live.new_tracepoint_signal import (
    NewTracepointSignal,
)
from tests.support import other_names
from tests.support.kernel_support import wait_until

pytestmark = pytest.mark.kernel


def _probes(tracefs, signal: NewTracepointSignal) -> list[str]:
    return [n for n in tracefs.events(USER_EVENTS_MULTI_SYSTEM) if n.startswith(signal.name + ".")]


def test_the_signal_sees_another_process_make_a_multi_format_tracepoint(
    tracefs, kernel_has_multi_format
):
    signal = NewTracepointSignal(tracefs)
    held = -1
    try:
        assert signal.changed()  # nothing known yet
        if not kernel_has_multi_format:
            assert signal.unavailable is not None and "EINVAL" in signal.unavailable
            return
        signal.learn(tracefs.events(USER_EVENTS_MULTI_SYSTEM))
        assert not signal.changed() and not signal.changed()
        held, layout = other_names.register(1, start=os.getpid())
        assert layout == "multi"
        assert signal.changed()
        signal.learn(tracefs.events(USER_EVENTS_MULTI_SYSTEM))
        assert not signal.changed()
        assert signal.unavailable is None
    finally:
        signal.close()
        if held >= 0:
            os.close(held)
    assert wait_until(lambda: not _probes(tracefs, signal), 10), _probes(tracefs, signal)
