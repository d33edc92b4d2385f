# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Who may use user_events: root, a granted group, nobody else (with a clear reason)."""

import os
import struct

import pytest

from opentelemetry_exporter_userevents.abi import UserEventsData
from tests.kernel_support import drop_privileges, in_child

pytestmark = pytest.mark.kernel

SERVICE_GID = 4242


def test_unprivileged_user_gets_unavailable_with_a_reason(tracefs):
    def open_unprivileged():
        drop_privileges()
        data = UserEventsData()
        return [data.available, data.reason]

    available, reason = in_child(open_unprivileged)

    assert available is False
    assert "no permission" in reason and "user_events_data" in reason


def test_group_granted_access_lets_a_service_register_and_write(tracefs, event_name, attach):
    """The README recipe: group-own user_events_data (rw) and tracefs's root (x)."""
    data_path = os.path.join(tracefs.path, "user_events_data")
    saved = [(p, os.stat(p)) for p in (tracefs.path, data_path)]
    os.chown(tracefs.path, -1, SERVICE_GID)
    os.chmod(tracefs.path, 0o710)
    os.chown(data_path, -1, SERVICE_GID)
    os.chmod(data_path, 0o660)
    try:
        with UserEventsData(tracefs.path) as root_data:
            listened = root_data.register(f"{event_name} u32 a")
            attach(listened)

            def as_service():
                drop_privileges(groups=(SERVICE_GID,))
                data = UserEventsData()
                registration = data.register(f"{event_name} u32 a")
                return [data.available, registration.enabled,
                        registration.write(struct.pack("<I", 5))]  # fmt: skip

            assert in_child(as_service) == [True, True, 8]
    finally:
        for path, stat in saved:
            os.chown(path, stat.st_uid, stat.st_gid)
            os.chmod(path, stat.st_mode & 0o7777)
