# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Multi-format naming on a real kernel (selftest abi_test multi_format)."""

import json
import re
import subprocess
import sys

import pytest

from opentelemetry_exporter_userevents.abi import (
    USER_EVENT_REG_MULTI_FORMAT,
    USER_EVENTS_MULTI_SYSTEM,
    UserEventsData,
)
from tests.support.kernel_support import wait_until

pytestmark = [pytest.mark.kernel, pytest.mark.multi_format]

REGISTER_IN_OTHER_PROCESS = """
import json, sys
from opentelemetry_exporter_userevents.abi import UserEventsData
data = UserEventsData()
registration = data.register(sys.argv[1])
print(json.dumps([registration.system, registration.tracepoint]))
"""


def register_elsewhere(command: str) -> list[str]:
    """Register ``command`` in a new Python process; return its (system, tracepoint)."""
    out = subprocess.run(
        [sys.executable, "-c", REGISTER_IN_OTHER_PROCESS, command],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(out.stdout)


def test_name_is_user_events_multi_name_dot_hex_id(data, event_name, tracefs):
    registration = data.register(f"{event_name} u64 start; __rel_loc char[] name")

    assert registration.system == USER_EVENTS_MULTI_SYSTEM
    assert data.multi_format is True
    assert re.fullmatch(rf"{event_name}\.[0-9a-f]+", registration.tracepoint)
    fmt = tracefs.read_format(USER_EVENTS_MULTI_SYSTEM, registration.tracepoint)
    assert fmt.name == registration.tracepoint
    assert [(f.name, f.offset, f.size) for f in fmt.fields] == [("start", 8, 8), ("name", 16, 4)]
    assert fmt.id == tracefs.event_id(USER_EVENTS_MULTI_SYSTEM, registration.tracepoint)


def test_same_format_in_two_processes_shares_one_tracepoint(data, event_name, tracefs):
    command = f"{event_name} u64 start; __rel_loc char[] name"
    mine = data.register(command)

    theirs = register_elsewhere(command)

    assert theirs == [USER_EVENTS_MULTI_SYSTEM, mine.tracepoint]
    assert tracefs.multi_format_versions(event_name) == [mine.tracepoint]


def test_other_format_gets_a_new_tracepoint_and_breaks_nothing(data, event_name, tracefs):
    old = data.register(f"{event_name} u64 start; __rel_loc char[] name")

    new_system, new_tracepoint = register_elsewhere(f"{event_name} u64 start; u32 kind")

    assert new_system == USER_EVENTS_MULTI_SYSTEM
    assert new_tracepoint != old.tracepoint
    assert int(new_tracepoint.rsplit(".", 1)[1], 16) > int(old.tracepoint.rsplit(".", 1)[1], 16)
    old_format = tracefs.read_format(USER_EVENTS_MULTI_SYSTEM, old.tracepoint)
    assert [f.name for f in old_format.fields] == ["start", "name"]


def test_format_match_ignores_whitespace_but_not_type_spelling(data, event_name):
    base = data.register(f"{event_name} u32 a; u32 b")
    spaced = data.register(f"{event_name} u32 a;u32 b")
    spelled = data.register(f"{event_name} u32 a; unsigned int b")

    assert spaced.tracepoint == base.tracepoint
    assert spaced.write_index == base.write_index
    assert spelled.tracepoint != base.tracepoint, "u32 and unsigned int are distinct formats"


def test_single_and_multi_format_of_one_name_coexist(data, event_name, tracefs):
    single = data.register(f"{event_name} u32 a", 0)
    multi = data.register(f"{event_name} u64 a", USER_EVENT_REG_MULTI_FORMAT)

    assert single.tracepoint == event_name
    assert event_name in tracefs.events("user_events")
    assert multi.tracepoint in tracefs.multi_format_versions(event_name)


def test_each_version_disappears_after_its_last_user(tracefs, event_name):
    data = UserEventsData(tracefs.path)
    first = data.register(f"{event_name} u32 a")
    second = data.register(f"{event_name} u64 a")
    names = {first.tracepoint, second.tracepoint}
    assert set(tracefs.multi_format_versions(event_name)) == names

    first.unregister()
    second.unregister()
    # The fd still holds both events (indexes are released only at close).
    assert set(tracefs.multi_format_versions(event_name)) == names
    data.close()

    assert wait_until(lambda: tracefs.multi_format_versions(event_name) == [])
