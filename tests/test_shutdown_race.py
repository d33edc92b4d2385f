# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Shutdown under load: exports racing ``shutdown()`` and ``force_flush()`` from many threads
never write to a descriptor the exporter no longer owns, even once the application has
opened files under the freed numbers, and every record is written or counted.

tests/kernel/test_shutdown_race.py runs :func:`race` against the kernel."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from opentelemetry_exporter_userevents import UserEventsSpanExporter
from tests.support.fake_kernel import FakeKernel

CONTEXT = SpanContext(0xABC, 0xDEF, is_remote=False)


def span(attributes: dict[str, object] | None = None) -> ReadableSpan:
    return ReadableSpan("s", CONTEXT, attributes=attributes or {"k": 1}, start_time=1, end_time=2)


def open_files(directory: Path, count: int) -> list[int]:
    """What an application does next: open files, which take the lowest free numbers."""
    return [
        os.open(directory / f"app{i}", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        for i in range(count)
    ]


def untouched(fds: list[int]) -> bool:
    return all(os.fstat(fd).st_size == 0 for fd in fds)


def test_writes_held_past_shutdown_never_reach_the_files_that_took_the_number(
    monkeypatch, tmp_path
):
    """Every thread is inside export, past the shutdown check, when shutdown closes the file
    and the application opens files under the freed number; then they write."""
    fake = FakeKernel(monkeypatch, tmp_path)
    threads = 8
    arrived = threading.Barrier(threads + 1)
    reopened = threading.Event()

    def redact(key: str, value: object) -> object:
        if key == "hold":
            arrived.wait()
            assert reopened.wait(60)
        return value

    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="race", redact=redact)
    exporter.export([span()])  # the resource record, written once
    number = exporter._writer._data.fd
    results: list[str] = []
    workers = [
        threading.Thread(target=lambda: results.append(exporter.export([span({"hold": 1})]).name))
        for _ in range(threads)
    ]
    for worker in workers:
        worker.start()
    arrived.wait()
    exporter.shutdown()
    files = open_files(tmp_path, 16)
    try:
        assert number in files, "the application's file took the exporter's number"
        reopened.set()
        for worker in workers:
            worker.join()
        assert untouched(files)
    finally:
        for fd in files:
            os.close(fd)
    fake.settle()
    stats = exporter.stats.snapshot()
    assert stats["dropped_shutdown"] == threads
    written = fake.records("race_span") + fake.records("race_resource")
    assert stats["written"] == 2 == len(written), "the first span and its resource"
    assert results == ["SUCCESS"] * threads


def test_shutdown_waits_for_a_write_in_flight_before_the_number_is_freed(monkeypatch, tmp_path):
    """A write holds the descriptor (it read the number, the syscall has not run) when
    shutdown starts: the file is closed only after that write, so files the application
    opens meanwhile get other numbers and the record reaches the exporter's file."""
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="held")
    exporter.export([span()])  # the resource record, written once
    data = exporter._writer._data
    number = data.fd
    in_writev, go = threading.Event(), threading.Event()
    real_writev = os.writev

    def writev(fd: int, buffers: object) -> int:
        if threading.current_thread().name == "held":
            in_writev.set()
            assert go.wait(60)
        return real_writev(fd, buffers)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "writev", writev)
    writer = threading.Thread(target=exporter.export, args=([span()],), name="held")
    writer.start()
    assert in_writev.wait(60)
    closer = threading.Thread(target=exporter.shutdown)
    closer.start()
    while closer.is_alive() and not data.closed:  # closed, or waiting for the write
        threading.Event().wait(0.001)
    files = open_files(tmp_path, 16)
    try:
        go.set()
        writer.join()
        closer.join()
        assert number not in files, "the number was still the exporter's"
        assert untouched(files)
    finally:
        for fd in files:
            os.close(fd)
    fake.settle()
    assert len(fake.records("held_span")) == 2 == exporter.stats.written - 1


def race(
    exporter: UserEventsSpanExporter, directory: Path, threads: int = 8
) -> tuple[list[int], dict[str, int], int]:
    """``threads`` threads export batches of two spans, with ``force_flush`` between them,
    until an export fails (the exporter is shut down), then 20 batches more; the main thread
    shuts the exporter down once every thread has exported, then opens files. Returns (those
    files' descriptors, still open; the stats; the spans handed)."""
    started = threading.Barrier(threads + 1)
    handed = [0] * threads

    def work(n: int) -> None:
        after = 0
        while after < 20:
            result = exporter.export([span(), span()])
            handed[n] += 2
            exporter.force_flush()
            if handed[n] == 2:
                started.wait()
            if result.name == "FAILURE":
                after += 1

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    started.wait()
    exporter.shutdown()
    files = open_files(directory, 64)
    for worker in workers:
        worker.join()
    return files, exporter.stats.snapshot(), sum(handed)


def accounted(stats: dict[str, int], handed: int, resources: int) -> bool:
    return sum(v for k, v in stats.items() if k != "truncated") == handed + resources


def test_threads_export_while_shutdown_runs_and_the_app_reopens_the_number(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="load")
    number = exporter._writer._data.fd
    files, stats, handed = race(exporter, tmp_path)
    try:
        assert number in files
        assert untouched(files)
    finally:
        for fd in files:
            os.close(fd)
    fake.settle()
    resources = len(fake.records("load_resource"))
    assert stats["written"] == len(fake.records("load_span")) + resources
    assert accounted(stats, handed, resources)
    assert stats["dropped_shutdown"] > 0 and stats["written"] > resources, "a race, both sides"
