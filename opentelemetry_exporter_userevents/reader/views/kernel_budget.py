# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""How many kernel events the kernel view may sum for spans, whatever intervals they claim.

Token buckets, refilled at each read of the kernel's events by the time since the last: one
per writer process (:data:`MAX_PROCESS_READ_SCAN`) and one for all (:data:`MAX_READ_SCAN`).
A bucket holds at most its size and refills at its size per second, so the reader's CPU for
sums is bounded per read (latency) and per second (throughput, however often it reads), and
a process whose spans claim huge intervals spends its own share, not a quiet app's. A span
gets what both buckets hold (at most :data:`.kernel_timeline.MAX_SCAN`); what it cannot sum
is ``unknown_ns`` of a partial span.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

MAX_PROCESS_READ_SCAN = 16_384
"""Kernel events summed for the spans of one writer process at most at once, and per
second: a few spans that claim huge intervals, thousands of ordinary ones."""
MAX_READ_SCAN = 65_536
"""Kernel events summed for all spans at most at once, and per second (about 50 ms of CPU
on the development host: ``benchmarks/kernel_view_worst_span.py``)."""
MAX_PAYERS = 4096
"""Processes whose bucket is kept (the least recently charged forgotten: its next span
finds it full; the bucket for all still bounds)."""

_NOBODY = object()


class ScanBudget:
    """The buckets; ``clock`` is seconds (monotonic)."""

    def __init__(
        self,
        per_process: int = MAX_PROCESS_READ_SCAN,
        overall: int = MAX_READ_SCAN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_process = per_process
        self.overall = overall
        self.clock = clock
        self._now = clock()
        self._left = float(overall)
        self._payers: dict[Hashable, tuple[float, float]] = {}
        """Payer -> (events left, when they were counted), the least recently charged
        first."""
        self._asked: tuple[Hashable, float] = (_NOBODY, 0.0)
        """The payer :meth:`allowance` was last asked for, and what it had left then (the
        clock moves only at :meth:`new_read`: :meth:`spend` uses it)."""

    def new_read(self) -> None:
        """A read of the kernel's events: the buckets refill for the time since the last."""
        now = self.clock()
        self._left = min(self.overall, self._left + (now - self._now) * self.overall)
        self._now = now

    def allowance(self, payer: Hashable) -> int:
        """Events ``payer``'s next span may sum."""
        left = self._payer_left(payer)
        self._asked = (payer, left)
        return int(min(left, self._left))

    def spend(self, payer: Hashable, events: int) -> None:
        self._left = max(self._left - events, 0.0)
        asked, left = self._asked
        self._asked = (_NOBODY, 0.0)
        if asked is not payer and asked != payer:
            left = self._payer_left(payer)
        payers = self._payers
        payers.pop(payer, None)  # last: the most recently charged
        payers[payer] = (max(left - events, 0.0), self._now)
        if len(payers) > MAX_PAYERS:
            del payers[next(iter(payers))]

    def _payer_left(self, payer: Hashable) -> float:
        found = self._payers.get(payer)
        if found is None:
            return self.per_process
        left, since = found
        return min(self.per_process, left + (self._now - since) * self.per_process)
