# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""ExportStats under threads and forks, and how write errors are told apart and reported."""

from __future__ import annotations

import errno
import logging
import os
import signal
import threading

import pytest

from opentelemetry_exporter_userevents import UserEventsSpanExporter
from tests.support.fake_kernel import FakeKernel
from tests.support.kernel_support import in_child
from tests.support.span_fixtures import make_spans

NEVER = 10**9  # a resource interval no test outlasts: one resource record per exporter


@pytest.fixture
def fake(monkeypatch, tmp_path):
    return FakeKernel(monkeypatch, tmp_path)


@pytest.fixture
def exporter(fake):
    exporter = UserEventsSpanExporter(
        tracefs=fake.tracefs, prefix="st", resource_interval_millis=NEVER
    )
    yield exporter
    exporter.shutdown()


def test_counts_are_exact_when_eight_threads_export_at_once(fake):
    exporter = UserEventsSpanExporter(
        tracefs=fake.tracefs, prefix="st", resource_interval_millis=NEVER
    )
    spans = make_spans()
    start = threading.Barrier(8)

    def export_many():
        start.wait()
        for _ in range(500):
            exporter.export(spans)

    threads = [threading.Thread(target=export_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fake.settle(exporter)

    assert exporter.stats.snapshot()["written"] == 8 * 500 * len(spans) + 1
    assert len(fake.records("st_span")) == 8 * 500 * len(spans)
    assert len(fake.records("st_resource")) == 1


def test_a_child_forked_while_another_thread_holds_the_locks_can_export(exporter, fake):
    """The child inherits locks held by threads it does not have; forksafe renews them."""
    held = [exporter.stats._lock, exporter._resources._lock, exporter._writer._data._lock]
    for lock in held:
        lock.acquire()
    try:

        def export_in_child():
            signal.alarm(20)  # a deadlock kills the child instead of hanging the test
            exporter.export(make_spans())
            exporter._writer._data.close()
            return exporter.stats.snapshot()

        stats = in_child(export_in_child)
    finally:
        for lock in held:
            lock.release()

    assert stats["written"] == 3, "two spans and the resource record"


def test_ebadf_on_an_open_file_is_a_detached_listener(exporter, monkeypatch, caplog):
    def detached(fd, buffers):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(os, "writev", detached)
    exporter.export(make_spans())

    stats = exporter.stats.snapshot()
    assert stats["dropped_detached"] == 3 and stats["dropped_write_error"] == 0
    assert not caplog.records, "a detach is expected: counted, not logged"


def test_ebadf_because_other_code_closed_the_file_is_a_write_error(exporter, caplog):
    os.close(exporter._writer._data.fd)  # as an application's closerange() would

    exporter.export(make_spans())
    exporter.export(make_spans())
    exporter.shutdown()  # closing what is already closed does not raise

    stats = exporter.stats.snapshot()
    assert stats["dropped_write_error"] == 2 + 2 + 1 and stats["dropped_detached"] == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "closed by other code" in warnings[0]


def test_kernel_errors_are_counted_each_and_reported_once_per_errno(exporter, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG, "opentelemetry_exporter_userevents")
    errors = iter([errno.ENOMEM, errno.EFAULT] * 10)

    def failing(fd, buffers):
        raise OSError(next(errors), "from the kernel")

    monkeypatch.setattr(os, "writev", failing)
    for _ in range(4):
        exporter.export(make_spans())  # 8 spans, and the resource once (then not due)

    stats = exporter.stats.snapshot()
    assert stats["dropped_write_error"] == 9 and stats["written"] == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(warnings) == 2 and len(debug) == 7
    assert "ENOMEM" in warnings[0] and "EFAULT" in warnings[1]
    assert "write 'st_resource u64 resource_id" in warnings[0], "it names the event"
