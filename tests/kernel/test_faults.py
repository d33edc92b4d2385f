# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Faults on a real kernel, from the exporter's side: tracefs or rights gone mid-run, a
tracepoint someone tries to delete, bad buffers, the tracepoint limit, fork storms, exec
and signals. Nothing raises into the application and every record is counted."""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import signal
import sys
import threading

import pytest
from opentelemetry.sdk.trace import TracerProvider

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
    span_exporter,
)
from opentelemetry_exporter_userevents.record.schema import LOG, SPAN
from tests.support.app_tracepoints import register_as_exporter
from tests.support.kernel_support import (
    IoVec,
    drop_privileges,
    in_child,
    raw_writev,
    unmapped_buffer,
    unmount_in_a_private_namespace,
    write_with_index,
)
from tests.support.span_fixtures import make_logs, make_spans

pytestmark = pytest.mark.kernel

SERVICE_GID = 4242


@pytest.fixture
def exporter(prefix):
    exporter = UserEventsSpanExporter(prefix=prefix)
    yield exporter
    exporter.shutdown()


def emit(provider, count, name="s"):
    tracer = provider.get_tracer("t")
    for _ in range(count):
        with tracer.start_as_current_span(name):
            pass


def test_tracefs_unmounted_mid_run_the_open_file_keeps_working(exporter, tracefs, attach, prefix):
    attach(exporter.registration)

    def without_tracefs():
        unmount_in_a_private_namespace(tracefs.path)
        exporter.export(make_spans())
        late = UserEventsSpanExporter(prefix=prefix + "late")
        result = late.export(make_spans()).name
        return [exporter.stats.snapshot(), late._writer._data.reason, result, late.stats.snapshot()]

    stats, reason, late_result, late_stats = in_child(without_tracefs)

    assert stats["written"] == 2 and len(attach.lines(exporter.registration)) == 2
    assert "neither tracefs nor a bind-mounted user_events_data is here" in reason
    assert late_result == "SUCCESS" and set(late_stats.values()) == {0}


def test_rights_revoked_mid_run_the_open_file_keeps_working(prefix, tracefs, data, attach):
    """The kernel checks permissions at open only: a revoked grant stops new exporters."""
    listened = register_as_exporter(data, f"{prefix}_span", SPAN)
    attach(listened)
    paths = [tracefs.path, os.path.join(tracefs.path, "user_events_data")]
    saved = [(path, os.stat(path)) for path in paths]
    for path, mode in zip(paths, (0o710, 0o660), strict=True):
        os.chown(path, -1, SERVICE_GID)
        os.chmod(path, mode)
    ready, revoked = os.pipe(), os.pipe()
    results = []

    def as_a_service():
        drop_privileges(groups=(SERVICE_GID,))
        exporter = UserEventsSpanExporter(prefix=prefix)
        os.write(ready[1], b"1")
        os.read(revoked[0], 1)  # the grant is gone now
        exporter.export(make_spans())
        late = UserEventsSpanExporter(prefix=prefix)
        return [exporter.stats.snapshot(), late._writer._data.reason]

    child = threading.Thread(target=lambda: results.append(in_child(as_a_service)))
    child.start()
    try:
        os.read(ready[0], 1)
    finally:
        for path, stat in saved:
            os.chown(path, stat.st_uid, stat.st_gid)
            os.chmod(path, stat.st_mode & 0o7777)
        os.write(revoked[1], b"1")
        child.join()
    ((stats, reason),) = results

    assert stats["written"] == 2, "written after the grant was revoked"
    assert len(attach.lines(listened)) == 2
    assert "no permission" in reason


def test_the_kernel_refuses_to_delete_a_registered_tracepoint(exporter, tracefs, data, attach):
    attach(exporter.registration)
    name, fields = exporter.registration.command.split(" ", 1)
    dynamic_events = os.path.join(tracefs.path, "dynamic_events")

    def refused(action):
        try:
            action()
        except OSError as exc:
            return exc.errno
        return 0

    def delete_line():
        fd = os.open(dynamic_events, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, f"-:{name} {fields}".encode())
        finally:
            os.close(fd)

    by_ioctl = refused(lambda: data.delete(name))
    by_line = refused(delete_line)
    by_truncation = refused(lambda: os.close(os.open(dynamic_events, os.O_WRONLY | os.O_TRUNC)))
    exporter.export(make_spans())

    assert (by_ioctl, by_line, by_truncation) == (errno.EBUSY,) * 3
    assert exporter.stats.snapshot()["written"] == 2
    assert len(attach.lines(exporter.registration)) == 2
    assert exporter.registration.tracepoint in tracefs.events(exporter.registration.system)


def test_what_the_kernel_returns_for_unreadable_buffers(data, event_name, attach):
    registration = data.register(f"{event_name} u32 a")
    bad = unmapped_buffer(4)
    index = ctypes.c_int(registration.write_index)

    def errno_of(action):
        try:
            action()
        except OSError as exc:
            return errno.errorcode[exc.errno]
        return "ok"

    def iovecs(*pairs):
        array = (IoVec * len(pairs))(*(IoVec(base, length) for base, length in pairs))
        return ctypes.addressof(array), array

    disabled = errno_of(lambda: write_with_index(data.fd, registration.write_index, bad))
    attach(registration)
    enabled = errno_of(lambda: write_with_index(data.fd, registration.write_index, bad))
    huge_address, huge = iovecs((ctypes.addressof(index), 4), (ctypes.addressof(bad), 1 << 40))
    too_long = errno_of(lambda: raw_writev(data.fd, huge_address, 2))
    bad_array = errno_of(lambda: raw_writev(data.fd, ctypes.addressof(bad), 2))
    many_address, many = iovecs(*[(ctypes.addressof(index), 4)] + [(0, 0)] * 1024)
    too_many = errno_of(lambda: raw_writev(data.fd, many_address, 1025))

    assert disabled == "EBADF", "not listened to: refused before the buffer is read"
    assert (enabled, too_long, bad_array) == ("EFAULT",) * 3
    assert too_many == "EINVAL", "more than UIO_MAXIOV (1024) parts"
    assert attach.recorded() == 0


def test_efault_from_the_kernel_is_counted_and_the_exporter_goes_on(
    exporter, attach, monkeypatch, caplog
):
    attach(exporter.registration)
    real = span_exporter.encode_span
    calls = []

    def first_unreadable(*args):
        calls.append(1)
        payload, truncated = real(*args)
        return (unmapped_buffer(len(payload)) if len(calls) == 1 else payload), truncated

    monkeypatch.setattr(span_exporter, "encode_span", first_unreadable)

    assert exporter.export(make_spans()).name == "SUCCESS"

    stats = exporter.stats.snapshot()
    assert stats["dropped_write_error"] == 1 and stats["written"] == 1
    assert len(attach.lines(exporter.registration)) == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "EFAULT" in warnings[0]


def test_user_events_max_reached_counts_drops_as_unregistered(prefix, data, attach, caplog):
    """Existing tracepoints still register at the limit; new ones get EMFILE."""
    existing = {
        c: register_as_exporter(data, f"{prefix}_log_{c}", LOG) for c in ("trace", "debug", "info")
    }
    for registration in existing.values():
        attach(registration)
    path = "/proc/sys/kernel/user_events_max"
    with open(path) as f:
        saved = f.read().strip()
    try:
        with open(path, "w") as f:
            f.write("0")
        exporter = UserEventsLogExporter(prefix=prefix)
    finally:
        with open(path, "w") as f:
            f.write(saved)
    logs = make_logs()

    result = exporter.export(logs)
    stats = exporter.stats.snapshot()
    exporter.shutdown()

    assert result.name == "SUCCESS"
    assert stats["written"] == 4 + 4 + 5, "trace, debug and info (with the unset severity)"
    assert stats["dropped_unregistered"] == 12, "warn, error and fatal were not registered"
    assert attach.recorded() == stats["written"]
    refused = [r.getMessage() for r in caplog.records if "cannot register" in r.getMessage()]
    assert len(refused) == 4 and all("EMFILE" in message for message in refused)


CHILDREN = 8 if os.environ.get("USER_EVENTS_TESTBED_GUEST") == "1" else 32
SPANS_PER_CHILD = 50


def test_a_fork_storm_while_the_parent_exports_is_counted_exactly(exporter, attach):
    """Children forked while a parent thread exports (and may hold a lock) all export at
    once; the kernel holds exactly the records the counts say were written."""
    provider = TracerProvider()
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    attach(exporter.registration)
    stop = threading.Event()
    parent_offered = [0]

    def parent_exports():
        while not stop.is_set():
            emit(provider, 1, "parent")
            parent_offered[0] += 1

    background = threading.Thread(target=parent_exports)
    background.start()
    go_read, go_write = os.pipe()
    children = []
    try:
        for _ in range(CHILDREN):
            result_read, result_write = os.pipe()
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    os.read(go_read, 1)
                    before = exporter.stats.snapshot()  # the parent's counts, as forked
                    emit(provider, SPANS_PER_CHILD, "child")
                    after = exporter.stats.snapshot()
                    own = {name: after[name] - before[name] for name in after}
                    os.write(result_write, json.dumps(own).encode())
                    status = 0
                finally:
                    os._exit(status)
            os.close(result_write)
            children.append((pid, result_read))
        os.write(go_write, b"x" * CHILDREN)
        results = []
        for pid, result_read in children:
            with os.fdopen(result_read, "rb") as pipe:
                results.append(json.loads(pipe.read() or b"{}"))
            assert os.waitpid(pid, 0)[1] == 0
    finally:
        stop.set()
        background.join()
    parent = exporter.stats.snapshot()

    assert all(own["written"] == SPANS_PER_CHILD for own in results), results
    assert all(sum(own.values()) == SPANS_PER_CHILD for own in results), "nothing else counted"
    assert parent["written"] == parent_offered[0] and sum(parent.values()) == parent_offered[0]
    assert attach.recorded() == parent["written"] + CHILDREN * SPANS_PER_CHILD


def test_exec_drops_the_registrations_and_the_new_program_exports_anew(exporter, attach, prefix):
    attach(exporter.registration)
    program = (
        "import json, os\n"
        "from opentelemetry_exporter_userevents import UserEventsSpanExporter\n"
        "from tests.support.span_fixtures import make_spans\n"
        "def target(fd):\n"
        "    try:\n"
        "        return os.readlink(f'/proc/self/fd/{fd}')\n"
        "    except OSError:  # the directory listing's own descriptor\n"
        "        return ''\n"
        "fds = [target(fd) for fd in os.listdir('/proc/self/fd')]\n"
        f"exporter = UserEventsSpanExporter(prefix={prefix!r})\n"
        "exporter.export(make_spans())\n"
        "print(json.dumps([sum('user_events_data' in fd for fd in fds),"
        " exporter.stats.snapshot()['written']]))\n"
    )
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            exporter.export(make_spans()[:1])
            os.dup2(write_end, 1)
            os.dup2(write_end, 2)
            os.execv(sys.executable, [sys.executable, "-c", program])
        finally:
            os._exit(1)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        output = pipe.read()
    assert os.waitpid(pid, 0)[1] == 0, output

    inherited, written = json.loads(output)
    lines = attach.lines(exporter.registration)
    assert inherited == 0, "user_events_data is close-on-exec"
    assert written == 2
    assert len(lines) == 3 and all(f"-{pid} " in line for line in lines), "same pid after exec"


def test_signals_during_writes_lose_and_double_nothing(exporter, attach):
    """SIGALRM every 200 µs while spans are written: os.writev retries an EINTR (PEP 475),
    and the user_events write does not sleep, so none is expected in the first place."""
    provider = TracerProvider()
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    attach(exporter.registration)
    fired = [0]
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.__setitem__(0, fired[0] + 1))
    offered = 0
    signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
    try:
        while fired[0] < 200:  # stop on a count of signals, not on time
            emit(provider, 1)
            offered += 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    stats = exporter.stats.snapshot()
    assert stats["written"] == offered
    assert stats["dropped_write_error"] == stats["dropped_detached"] == 0
    assert attach.recorded() == offered


def test_a_closed_data_file_mid_run_is_a_counted_write_error(exporter, attach, caplog):
    """Other code closing our file descriptor (a daemon's closerange) gives EBADF, which is
    not mistaken for a detached listener."""
    attach(exporter.registration)
    os.close(exporter._writer._data.fd)

    assert exporter.export(make_spans()).name == "SUCCESS"

    stats = exporter.stats.snapshot()
    assert stats["dropped_write_error"] == 2 and stats["dropped_detached"] == 0
    assert attach.recorded() == 0
    assert any("closed by other code" in r.getMessage() for r in caplog.records)
