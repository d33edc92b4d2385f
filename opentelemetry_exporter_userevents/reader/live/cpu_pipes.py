# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The per-CPU ``trace_pipe_raw`` files of one tracefs instance, and what the kernel lost.

Every reader of an instance (our records, announcements, the kernel's events) reads the
same way: one file per CPU, opened non-blocking, one sub-buffer per ``read``, a bounded
number of pages per CPU per call (one busy CPU cannot starve the others, nor the caller's
other work), and the kernel's own count of what it lost, ``overrun`` (overwritten) plus
``dropped events`` (a full buffer that does not overwrite) from ``per_cpu/cpuN/stats``.
Those counts only grow while the instance lives; one that shrinks (a file we do not
expect) is taken as the new base, never as a negative loss.
"""

from __future__ import annotations

import os
import select
import time
from dataclasses import dataclass

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs


@dataclass
class _Pipe:
    cpu: int
    fd: int
    lost_seen: int = 0


class CpuPipes:
    """Reads an instance's per-CPU ``trace_pipe_raw`` and counts the kernel's losses."""

    def __init__(self, tracefs: Tracefs, instance: str, pages_per_read: int) -> None:
        """``pages_per_read``: the most pages one :meth:`read` takes from one CPU (the
        caller documents its bound)."""
        self.tracefs = tracefs
        self.instance = instance
        self.pages_per_read = pages_per_read
        self.lost = 0
        """Records the kernel lost in this instance, all CPUs, since :meth:`open`."""
        self.lost_per_cpu: dict[int, int] = {}
        self.last_read_lost = 0
        """Of :attr:`lost`, how many the last :meth:`count_lost` found."""
        self.first_loss: float | None = None
        self.last_loss: float | None = None
        """``time.monotonic()`` of the first and last count that found a loss."""
        self.last_read_pages = 0
        """How many pages the last :meth:`read` gave, all CPUs."""
        self._pipes: list[_Pipe] = []

    def open(self) -> None:
        """Open every CPU's ``trace_pipe_raw`` (non-blocking)."""
        for cpu in self.tracefs.cpus(self.instance):
            path = self.tracefs.trace_pipe_raw(self.instance, cpu)
            self._pipes.append(_Pipe(cpu, os.open(path, os.O_RDONLY | os.O_NONBLOCK)))
            self.lost_per_cpu[cpu] = 0

    @property
    def fds(self) -> list[int]:
        """The open files, one per CPU (to ``poll`` them)."""
        return [pipe.fd for pipe in self._pipes]

    def register(self, poll: select.poll) -> None:
        """Have ``poll`` wake when a CPU has a page to read (the instance's
        ``buffer_percent`` says how full it must be first)."""
        for pipe in self._pipes:
            poll.register(pipe.fd, select.POLLIN)

    def read(self, page_size: int, count_idle_cpus: bool = True) -> list[tuple[int, bytes]]:
        """(cpu, sub-buffer) of up to ``pages_per_read`` pages per CPU, CPU by CPU; never
        blocks. Then counts the losses: of every CPU, or (``count_idle_cpus`` False: a
        stats file less per idle CPU, for a reader woken often) of the CPUs that had
        pages, where an overflow leaves them."""
        pages: list[tuple[int, bytes]] = []
        busy: list[_Pipe] = []
        for pipe in self._pipes:
            before = len(pages)
            for _ in range(self.pages_per_read):
                try:
                    page = os.read(pipe.fd, page_size)
                except BlockingIOError:
                    break
                except InterruptedError:
                    continue
                if not page:
                    break
                pages.append((pipe.cpu, page))
            if len(pages) > before:
                busy.append(pipe)
        self.count_lost(self._pipes if count_idle_cpus else busy)
        self.last_read_pages = len(pages)
        return pages

    def count_lost(self, pipes: list[_Pipe] | None = None) -> int:
        """Add what the kernel lost since the last count (every CPU by default); return
        it (also in :attr:`last_read_lost`)."""
        found = 0
        for pipe in self._pipes if pipes is None else pipes:
            try:
                stats = self.tracefs.cpu_stats(self.instance, pipe.cpu)
            except OSError:
                continue
            lost = stats.get("overrun", 0) + stats.get("dropped events", 0)
            if lost > pipe.lost_seen:
                found += lost - pipe.lost_seen
                self.lost_per_cpu[pipe.cpu] += lost - pipe.lost_seen
            pipe.lost_seen = lost
        self.last_read_lost = found
        if found:
            self.lost += found
            now = time.monotonic()
            self.first_loss = self.first_loss or now
            self.last_loss = now
        return found

    def close(self, poll: select.poll | None = None) -> None:
        """Close the files (idempotent), unregistered from ``poll`` first if they were
        registered with it (a closed file would wake it for ever)."""
        for pipe in self._pipes:
            if poll is not None:
                poll.unregister(pipe.fd)
            os.close(pipe.fd)
        self._pipes = []
