# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The rest between two reads of the live reader's buffers, and what ends it early.

``record`` rests a poll interval between reads that found little, and reads at once when the
kernel says a CPU's buffer is ``buffer_percent`` full (a burst, which would otherwise fill a
small buffer during the rest), as ``trace-cmd record`` waits for its watermark: ``poll`` on
an instance's ``trace_pipe_raw`` waits for that (:data:`WAKE_PERCENT`, set on the
instance), and for an announcement, whose instance wakes at its first record.
"""

from __future__ import annotations

import select

from opentelemetry_exporter_userevents.reader.live.cpu_pipes import CpuPipes

WAKE_PERCENT = 50
"""How full a CPU's buffer is when the kernel ends the rest (the instance's
``buffer_percent``, the kernel's default too): long before the buffer could overflow."""


class ReadWakeup:
    """Polls the buffers (and the announcements, if any) between reads."""

    def __init__(self, buffers: CpuPipes, announcements: CpuPipes | None) -> None:
        """Both opened already."""
        self.buffers = buffers
        self._polls: dict[tuple[bool, bool], select.poll] = {}
        """By (buffers watched, announcements watched)."""
        for watch in (True, False):
            for hear in (True, False):
                poll = self._polls[watch, hear] = select.poll()
                if watch:
                    buffers.register(poll)
                if hear and announcements is not None:
                    announcements.register(poll)
        self._woken = False
        """Whether the last :meth:`wait` ended on a buffer's watermark."""

    def wait(self, timeout: float, announcements: bool = True) -> bool:
        """Up to ``timeout`` seconds; whether something is there to read sooner (with
        ``announcements`` False, an announcement does not end it: the thread that answers
        them reads them). If the read after a watermark wake found a page or less per CPU,
        this one does not watch the buffers (a file that polls readable at once, whatever
        its fill, would otherwise have the reader read without rest)."""
        buffers = self.buffers
        watch = not (self._woken and buffers.last_read_pages <= len(buffers.fds))
        try:
            ready = self._polls[watch, announcements].poll(timeout * 1000)
        except InterruptedError:
            return False
        fds = set(buffers.fds)
        self._woken = watch and any(fd in fds for fd, _events in ready)
        return bool(ready)
