# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""CpuPipes on a fake tracefs: per-CPU files of pages, and ``stats`` files whose counts
the test sets (untrusted like the rest of tracefs)."""

from __future__ import annotations

import os
import select
from pathlib import Path

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.reader.live.cpu_pipes import CpuPipes

PAGE = 64
INSTANCE = "otel-userevents.test"


class FakeInstance:
    def __init__(self, root: Path, cpus: int) -> None:
        self.tracefs = Tracefs(str(root))
        self.root = root / "instances" / INSTANCE / "per_cpu"
        for cpu in range(cpus):
            (self.root / f"cpu{cpu}").mkdir(parents=True)
            self.pages(cpu, 0)
            self.stats(cpu, overrun=0, dropped=0)

    def pages(self, cpu: int, count: int) -> None:
        data = b"".join(bytes([cpu, n % 256]) * (PAGE // 2) for n in range(count))
        (self.root / f"cpu{cpu}" / "trace_pipe_raw").write_bytes(data)

    def stats(self, cpu: int, overrun: int | str, dropped: int | str) -> None:
        text = f"entries: 3\noverrun: {overrun}\ncommit overrun: 0\ndropped events: {dropped}\n"
        (self.root / f"cpu{cpu}" / "stats").write_text(text)


def pipes_of(fake: FakeInstance, pages_per_read: int = 8) -> CpuPipes:
    pipes = CpuPipes(fake.tracefs, INSTANCE, pages_per_read)
    pipes.open()
    return pipes


def test_pages_are_read_cpu_by_cpu_up_to_the_bound_per_cpu(tmp_path):
    fake = FakeInstance(tmp_path, cpus=3)
    fake.pages(0, 5)
    fake.pages(2, 20)  # a busy CPU: only the bound is taken per read
    pipes = pipes_of(fake, pages_per_read=8)
    try:
        first = pipes.read(PAGE)
        assert [cpu for cpu, _ in first] == [0] * 5 + [2] * 8
        assert all(len(page) == PAGE for _, page in first)
        assert first[5][1][:2] == bytes([2, 0])
        second = pipes.read(PAGE)
        assert [cpu for cpu, _ in second] == [2] * 8
        assert second[0][1][:2] == bytes([2, 8])  # went on where the last read stopped
        assert [cpu for cpu, _ in pipes.read(PAGE)] == [2] * 4
        assert pipes.read(PAGE) == []
    finally:
        pipes.close()


def test_losses_are_counted_per_cpu_and_in_total_with_their_first_and_last_time(tmp_path):
    fake = FakeInstance(tmp_path, cpus=2)
    pipes = pipes_of(fake)
    try:
        pipes.read(PAGE)
        assert pipes.lost == 0 and pipes.first_loss is None
        fake.stats(0, overrun=3, dropped=0)
        fake.stats(1, overrun=0, dropped=4)
        pipes.read(PAGE)
        assert pipes.lost == 7 and pipes.last_read_lost == 7
        assert pipes.lost_per_cpu == {0: 3, 1: 4}
        first = pipes.first_loss
        assert first is not None
        fake.stats(0, overrun=5, dropped=1)  # counts grow: only the growth is new
        pipes.read(PAGE)
        assert pipes.lost == 10 and pipes.lost_per_cpu == {0: 6, 1: 4}
        assert pipes.first_loss == first and pipes.last_loss is not None
        assert pipes.last_loss >= first
        pipes.read(PAGE)
        assert pipes.last_read_lost == 0 and pipes.lost == 10
    finally:
        pipes.close()


def test_hostile_stats_never_make_a_negative_or_phantom_loss(tmp_path):
    fake = FakeInstance(tmp_path, cpus=1)
    pipes = pipes_of(fake)
    try:
        fake.stats(0, overrun=100, dropped=0)
        pipes.read(PAGE)
        fake.stats(0, overrun=2, dropped=0)  # shrank: the new base, not a loss of -98
        pipes.read(PAGE)
        assert pipes.lost == 100
        fake.stats(0, overrun=5, dropped=0)  # grew from the new base
        pipes.read(PAGE)
        assert pipes.lost == 103
        fake.stats(0, overrun="-7", dropped="lots")  # not numbers: ignored
        pipes.read(PAGE)
        assert pipes.lost == 103
        (fake.root / "cpu0" / "stats").unlink()  # unreadable: nothing counted, no error
        assert pipes.read(PAGE) == []
        assert pipes.lost == 103
    finally:
        pipes.close()


def test_idle_cpus_are_not_counted_when_asked_and_are_by_default(tmp_path):
    fake = FakeInstance(tmp_path, cpus=2)
    pipes = pipes_of(fake)
    try:
        fake.stats(1, overrun=2, dropped=0)
        fake.pages(0, 1)
        pipes.read(PAGE, count_idle_cpus=False)  # cpu 1 had no page: not looked at
        assert pipes.lost == 0
        pipes.read(PAGE)
        assert pipes.lost == 2
    finally:
        pipes.close()


def test_poll_registration_and_close_unregister_and_close_every_file(tmp_path):
    fake = FakeInstance(tmp_path, cpus=3)
    pipes = pipes_of(fake)
    poll = select.poll()
    pipes.register(poll)
    fds = pipes.fds
    assert len(fds) == 3
    assert {fd for fd, _ in poll.poll(0)} == set(fds)  # regular files are always ready
    pipes.close(poll)
    assert poll.poll(0) == []  # unregistered: no POLLNVAL for ever
    for fd in fds:
        try:
            os.fstat(fd)
        except OSError:
            continue
        raise AssertionError(f"fd {fd} left open")  # pragma: no cover
    pipes.close(poll)  # idempotent
