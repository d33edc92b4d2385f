# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Who may use user_events: root, a granted group, nobody else (with a clear reason)."""

import os
import struct
import sys

import pytest

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.abi import UserEventsData
from opentelemetry_exporter_userevents.record.schema import LOG, SPAN
from tests.support.app_tracepoints import register_as_exporter
from tests.support.kernel_support import drop_privileges, in_child
from tests.support.span_fixtures import make_logs, make_spans

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


class GroupGrant:
    """The README's grant for the group SERVICE_GID, undone on exit."""

    def __init__(self, tracefs, root_mode: int = 0o710, data_mode: int = 0o660) -> None:
        self.paths = {tracefs.path: root_mode, os.path.join(tracefs.path, "user_events_data"):
                      data_mode}  # fmt: skip

    def __enter__(self) -> None:
        self.saved = [(path, os.stat(path)) for path in self.paths]
        for path, mode in self.paths.items():
            os.chown(path, -1, SERVICE_GID)
            os.chmod(path, mode)

    def __exit__(self, *exc_info: object) -> None:
        for path, stat in self.saved:
            os.chown(path, stat.st_uid, stat.st_gid)
            os.chmod(path, stat.st_mode & 0o7777)


def test_exporters_in_a_service_with_only_the_group_grant(tracefs, event_name, attach):
    """An application running as nobody, whose one extra right is the group's access to
    user_events_data: it exports spans and logs, and every count is exact."""
    prefix = "svc_" + str(abs(hash(event_name)) % 10**8)
    with UserEventsData(tracefs.path) as root_data, GroupGrant(tracefs):
        attach(register_as_exporter(root_data, f"{prefix}_span", SPAN))
        attach(register_as_exporter(root_data, f"{prefix}_log_error", LOG))

        def as_service():
            drop_privileges(groups=(SERVICE_GID,))
            spans = UserEventsSpanExporter(prefix=prefix)
            logs = UserEventsLogExporter(prefix=prefix)
            made_spans = make_spans(UserEventsSpanProcessor(spans))
            made_logs = make_logs(UserEventsLogRecordProcessor(logs))
            return [os.getuid(), os.getgroups(), len(made_spans), len(made_logs),
                    spans.stats.snapshot(), logs.stats.snapshot()]  # fmt: skip

        uid, groups, span_count, log_count, span_stats, log_stats = in_child(as_service)
        recorded = attach.recorded()

    assert uid == 65534 and groups == [SERVICE_GID]
    assert span_stats["written"] == span_count == 2
    assert log_stats["written"] == 4, "error logs only: the one class listened to"
    assert recorded == 2 + 4
    assert span_stats["dropped_write_error"] == log_stats["dropped_write_error"] == 0


def test_the_group_grant_needs_search_access_to_tracefs(tracefs):
    def as_service():
        drop_privileges(groups=(SERVICE_GID,))
        data = UserEventsData()
        return [data.available, data.reason]

    with GroupGrant(tracefs, root_mode=0o700):
        available, reason = in_child(as_service)

    assert available is False
    assert "no permission" in reason and f"search (x) access to {tracefs.path}" in reason


WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
CREATING_EVENTS = {"os.mkdir", "os.chmod", "os.chown", "os.rename", "os.symlink", "os.link",
                   "os.truncate", "os.mkfifo", "os.mknod", "shutil.copyfile", "tempfile.mkstemp",
                   "tempfile.mkdtemp"}  # fmt: skip


def test_the_package_creates_no_files_and_opens_only_user_events_data_for_writing(tracefs):
    """Audited with sys.addaudithook through a whole exporter life, under umask 0: the one
    file opened for writing is user_events_data (no O_CREAT), and nothing is created."""

    def audited_life():
        os.umask(0)
        seen = []

        def hook(event, args):
            if event == "open" and args[0] is not None:
                path, mode, flags = args
                writes = (mode and set(mode) & set("wax+")) or (flags or 0) & WRITE_FLAGS
                if writes:
                    seen.append(["open", str(path), mode, flags])
            elif event in CREATING_EVENTS:
                seen.append([event, str(args[0])])

        sys.addaudithook(hook)
        spans = UserEventsSpanExporter(prefix="audit")
        logs = UserEventsLogExporter(prefix="audit")
        make_spans(UserEventsSpanProcessor(spans))
        make_logs(UserEventsLogRecordProcessor(logs))
        spans.export(make_spans())
        logs.export(make_logs())
        return seen

    seen = in_child(audited_life)

    data_path = os.path.join(tracefs.path, "user_events_data")
    assert seen, "the hook saw the exporters open user_events_data"
    for event in seen:
        assert event[0] == "open" and event[1] == data_path, event
        assert event[3] & (os.O_CREAT | os.O_TRUNC | os.O_APPEND) == 0, event


def test_nothing_the_exporters_or_the_test_bed_leave_is_world_writable(tracefs, data):
    exporter = UserEventsSpanExporter(prefix="modes")
    try:
        registration = exporter.registration
        event_dir = tracefs.event_dir(registration.system, registration.tracepoint)
        paths = [tracefs.path, os.path.join(tracefs.path, "user_events_data"), event_dir]
        paths += [os.path.join(event_dir, name) for name in os.listdir(event_dir)]
        share = os.environ.get("TESTBED_SHARE")
        if share:  # the qemu guest's shared directory, and the files in it
            paths += [share] + [os.path.join(share, name) for name in os.listdir(share)]
        modes = {path: os.stat(path).st_mode & 0o7777 for path in paths}
    finally:
        exporter.shutdown()

    assert all(mode & 0o002 == 0 for mode in modes.values()), modes
    assert modes[os.path.join(tracefs.path, "user_events_data")] == 0o640
