# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Event lifetime on a real kernel: automatic delete after the last close, DIAG_IOCSDEL."""

import errno

import pytest

from opentelemetry_exporter_userevents.abi import UserEventsData, UserEventsError
from tests.support.kernel_support import wait_until

pytestmark = pytest.mark.kernel


def test_event_is_deleted_after_the_last_close(tracefs, event_name):
    data = UserEventsData(tracefs.path)
    data.register(f"{event_name} u32 a", 0)
    assert event_name in tracefs.events("user_events")

    data.close()

    assert wait_until(lambda: event_name not in tracefs.events("user_events"))
    data.close()  # idempotent


def test_event_lives_while_another_process_file_holds_it(tracefs, event_name):
    first = UserEventsData(tracefs.path)
    second = UserEventsData(tracefs.path)
    first.register(f"{event_name} u32 a", 0)
    second.register(f"{event_name} u32 a", 0)

    first.close()
    still_there = not wait_until(lambda: event_name not in tracefs.events("user_events"), 0.5)
    second.close()

    assert still_there
    assert wait_until(lambda: event_name not in tracefs.events("user_events"))


def test_delete_while_registered_is_ebusy(tracefs, event_name):
    data = UserEventsData(tracefs.path)
    registration = data.register(f"{event_name} u32 a", 0)

    with pytest.raises(UserEventsError) as busy:
        data.delete(event_name)
    registration.unregister()
    with pytest.raises(UserEventsError) as held_by_fd:
        data.delete(event_name)
    data.close()

    assert busy.value.errno == errno.EBUSY
    assert held_by_fd.value.errno == errno.EBUSY, "the fd holds the event until close"
    assert "still in use" in busy.value.meaning
    assert wait_until(lambda: event_name not in tracefs.events("user_events"))


def test_delete_of_unknown_name_is_enoent(data, event_name):
    with pytest.raises(UserEventsError) as caught:
        data.delete(event_name + "_never_registered")

    assert caught.value.errno == errno.ENOENT


def test_close_unregisters_every_registration(tracefs, event_name, attach):
    keeper = UserEventsData(tracefs.path)
    kept = keeper.register(f"{event_name} u32 a")
    attach(kept)
    data = UserEventsData(tracefs.path)
    registrations = [data.register(f"{event_name} u32 a") for _ in range(3)]
    assert all(r.enabled for r in registrations)

    data.close()

    assert [r.enable_word[0] for r in registrations] == [0, 0, 0]
    assert kept.enabled is True
    keeper.close()


def test_an_event_enabled_in_an_instance_keeps_its_id_until_disabled(tracefs, event_name):
    """A reader reads an enabled tracepoint's id only now and then (``TraceReader.scan``,
    ``ID_RECHECK_INTERVAL``): enabled in an instance, the event holds a reference, so its
    name can be neither deleted nor made again under another id, even once its writer is
    gone; disabled there, it goes."""
    instance = f"lifetime.{event_name}"
    data = UserEventsData(tracefs.path)
    data.register(f"{event_name} u32 a", 0)
    before = tracefs.event_id("user_events", event_name)
    tracefs.create_instance(instance)
    try:
        tracefs.set_enabled("user_events", event_name, True, instance)
        data.close()  # the writer's last reference
        deleter = UserEventsData(tracefs.path)
        with pytest.raises(UserEventsError) as busy:
            deleter.delete(event_name)
        deleter.close()
        still_there = not wait_until(lambda: event_name not in tracefs.events("user_events"), 2)
        assert still_there and tracefs.event_id("user_events", event_name) == before
        tracefs.set_enabled("user_events", event_name, False, instance)
    finally:
        tracefs.remove_instance(instance)
    assert busy.value.errno == errno.EBUSY
    assert wait_until(lambda: event_name not in tracefs.events("user_events"))
