# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The enable bit on a real kernel (selftests abi_test enablement/forks/clones,
perf_test perf_write/perf_empty_events)."""

import os
import struct
import threading

import pytest

from opentelemetry_exporter_userevents.abi import UserEventsData
from tests.support.kernel_support import PerfTracepoint, wait_until

pytestmark = pytest.mark.kernel


def test_bit_follows_tracefs_enable(data, event_name, tracefs):
    registration = data.register(f"{event_name} u32 a")
    assert registration.enabled is False

    tracefs.set_enabled(registration.system, registration.tracepoint, True)
    on = registration.enable_word[0]
    tracefs.set_enabled(registration.system, registration.tracepoint, False)
    off = registration.enable_word[0]

    assert (on, off) == (1, 0)


def test_bit_follows_enable_in_a_tracefs_instance(data, event_name, tracefs):
    registration = data.register(f"{event_name} u32 a")
    instance = os.path.join(tracefs.path, "instances", event_name)
    os.mkdir(instance)
    try:
        tracefs.set_enabled(registration.system, registration.tracepoint, True, event_name)
        seen = registration.enabled
        tracefs.set_enabled(registration.system, registration.tracepoint, False, event_name)
    finally:
        os.rmdir(instance)

    assert seen is True
    assert registration.enabled is False


def test_registration_sees_a_listener_attached_before_it(data, event_name, tracefs, attach):
    first = data.register(f"{event_name} u32 a")
    attach(first)

    with UserEventsData(tracefs.path) as other:
        late = other.register(f"{event_name} u32 a")
        assert late.enabled is True


def test_perf_attach_sets_the_bit_and_carries_the_record(data, event_name, tracefs):
    registration = data.register(f"{event_name} u32 a; u64 b")
    tracepoint_id = tracefs.event_id(registration.system, registration.tracepoint)
    fmt = tracefs.read_format(registration.system, registration.tracepoint)

    perf = PerfTracepoint(tracepoint_id, this_task=True)
    try:
        assert registration.enabled is True
        registration.write(struct.pack("<IQ", 0xC001, 0xC01A))
        samples = perf.samples()
    finally:
        perf.close()

    assert registration.enabled is False, "closing the perf fd clears the bit"
    assert len(samples) == 1
    raw = samples[0]
    assert struct.unpack_from("<H", raw, 0)[0] == tracepoint_id, "common_type is the event id"
    assert struct.unpack_from("<I", raw, fmt.field("a").offset)[0] == 0xC001
    assert struct.unpack_from("<Q", raw, fmt.field("b").offset)[0] == 0xC01A


def test_perf_records_a_field_less_event(data, event_name, tracefs):
    registration = data.register(event_name)
    perf = PerfTracepoint(
        tracefs.event_id(registration.system, registration.tracepoint), this_task=True
    )
    try:
        assert registration.write() == 4
        samples = perf.samples()
    finally:
        perf.close()

    assert len(samples) == 1


def test_unregister_clears_the_bit_and_stops_updates(data, event_name, tracefs, attach):
    registration = data.register(f"{event_name} u32 a")
    keeper = data.register(f"{event_name} u32 a")  # keeps the tracepoint alive
    attach(keeper)
    assert registration.enabled is True
    word = registration.enable_word

    registration.unregister()
    cleared = word[0]
    tracefs.set_enabled(keeper.system, keeper.tracepoint, False)
    tracefs.set_enabled(keeper.system, keeper.tracepoint, True)

    assert cleared == 0
    assert word[0] == 0, "the kernel no longer writes an unregistered word"
    assert keeper.enabled is True
    registration.unregister()  # idempotent


def test_forked_child_sees_enables_and_its_unregister_leaves_the_parent(data, event_name, tracefs):
    registration = data.register(f"{event_name} u32 a")
    system, tracepoint = registration.system, registration.tracepoint
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report the bit before and after the parent enables, then unregister
        try:
            os.write(up_w, b"1" if registration.enabled else b"0")
            os.read(down_r, 1)
            # The child's page is copy-on-write after fork, so the kernel may set the bit
            # through its deferred fault-in path (a workqueue): it can lag the enable.
            wait_until(lambda: registration.enabled, 60.0)  # a cap, not a wait
            os.write(up_w, b"1" if registration.enabled else b"0")
            registration.unregister()
            os.write(up_w, b"%d" % registration.enable_word[0])
        finally:
            os._exit(0)
    os.close(up_w)
    os.close(down_r)
    try:
        before = os.read(up_r, 1)
        tracefs.set_enabled(system, tracepoint, True)
        os.write(down_w, b"x")
        rest = os.read(up_r, 2)
        rest += os.read(up_r, 1) if len(rest) < 2 else b""
        os.waitpid(pid, 0)
        parent_after_child_unregister = registration.enabled
    finally:
        tracefs.set_enabled(system, tracepoint, False)
        os.close(down_w)
        os.close(up_r)

    assert before + rest == b"010", "child: disabled, then enabled, then cleared by its unreg"
    assert parent_after_child_unregister is True
    assert registration.enabled is False


def test_threads_share_the_enable_word(data, event_name, tracefs, attach):
    registration = data.register(f"{event_name} u32 a")
    seen = []
    attach(registration)

    thread = threading.Thread(target=lambda: seen.append(registration.enabled))
    thread.start()
    thread.join()

    assert seen == [True]


def test_exec_drops_the_enablers_but_not_the_parent(data, event_name, tracefs, attach):
    """A child that execs loses its copies of the enablers (include/linux/user_events.h)."""
    registration = data.register(f"{event_name} u32 a")
    attach(registration)
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/true", ["/bin/true"])
    os.waitpid(pid, 0)

    assert wait_until(lambda: registration.enabled)


def test_a_shared_word_carries_each_events_bit(tracefs, event_name, attach):
    """One word for several events (a second enabler per event): each event's bit follows
    its own listener, without touching the others' or the events' own words."""
    with UserEventsData(tracefs.path) as data:
        first = data.register(f"{event_name}_a u32 a")
        third = data.register(f"{event_name}_c u32 a")
        word = data.shared_enable_word([first, None, third])
        quiet = word[0]
        attach(third)
        third_only = (word[0], first.enable_word[0], third.enable_word[0])
        attach(first)
        both = word[0]
    after_close = word[0]

    assert quiet == 0
    assert third_only == (1 << 2, 0, 1)
    assert both == (1 << 0) | (1 << 2)
    assert after_close == 0, "closing removes the shared enablers, and the kernel clears them"
