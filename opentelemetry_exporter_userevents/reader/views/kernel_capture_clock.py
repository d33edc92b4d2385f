# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A capture's trace clock mapped onto the spans' clock (CLOCK_REALTIME ns), offline.

What the file says is used exactly: ``realtime`` is the spans' clock; a reference reading
(``perf record -k``'s (wall clock, clock) pair) gives the offset of any clock at that
moment. ``tai`` is CLOCK_REALTIME plus a whole number of seconds, which the spans give
(rounded). Any other clock (trace-cmd's default ``local``, perf's own, ``mono`` without a
reference) is estimated from our own span records: an exporter reads a span's end time,
then writes its record, so ``stamp - end_time_ns`` is the offset plus that delay, never
less. The offset taken is the median over writer threads of each thread's least ``stamp -
end_time_ns`` (at most :data:`MAX_THREADS` threads): a thread that lies about its end
times moves it only with as many threads as every honest writer together. Error bound: a
kernel event is mapped early by the median thread's least export delay (µs), plus the
drift of the trace clock against CLOCK_REALTIME over the capture (``local`` is not
disciplined by NTP: tens of ppm, so about 100 µs over 10 s).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_THREADS = 4096
"""Writer threads whose least delay is kept for the estimate; more are not counted."""
REALTIME = "realtime"
TAI = "tai"
_SECOND = 1_000_000_000


class ClockEstimate:
    """Each writer thread's least ``stamp - end_time_ns`` over its spans."""

    def __init__(self, max_threads: int = MAX_THREADS) -> None:
        self.max_threads = max_threads
        self.spans = 0
        self.threads_not_counted = 0
        self._least: dict[int, int] = {}

    def add(self, stamp: int, tid: int, end_time_ns: object) -> None:
        if not isinstance(end_time_ns, int) or isinstance(end_time_ns, bool):
            return
        delay = stamp - end_time_ns
        least = self._least.get(tid)
        if least is None:
            if len(self._least) >= self.max_threads:
                self.threads_not_counted += 1
                return
            self._least[tid] = delay
        elif delay < least:
            self._least[tid] = delay
        self.spans += 1

    @property
    def threads(self) -> int:
        return len(self._least)

    def offset(self) -> int | None:
        """The median of the threads' least delays (the lower one of two); None: no span."""
        if not self._least:
            return None
        values = sorted(self._least.values())
        return values[(len(values) - 1) // 2]


@dataclass
class CaptureClock:
    """How a capture's times map onto the spans' clock: ``span time = stamp - offset``."""

    clock: str
    offset_ns: int
    how: str
    """Said in the reader's first line: where the offset came from."""
    exact: bool


def map_clock(
    clock: str | None, reference: tuple[int, int] | None, estimate: ClockEstimate
) -> CaptureClock:
    """The mapping for a capture recorded with ``clock`` (None: the file does not say)."""
    name = clock or "unknown"
    if reference is not None:
        wall, reading = reference
        return CaptureClock(name, reading - wall, "the capture's own clock reading", True)
    if clock == REALTIME:
        return CaptureClock(name, 0, "the spans' clock", True)
    offset = estimate.offset()
    counted = f"{estimate.spans} spans of {estimate.threads} threads"
    if offset is None:
        return CaptureClock(name, 0, "no span to estimate it from", False)
    if clock == TAI:
        seconds = round(offset / _SECOND)
        return CaptureClock(name, seconds * _SECOND, f"whole seconds, from {counted}", True)
    return CaptureClock(name, offset, f"estimated from {counted}", False)


def clock_line(clock: CaptureClock) -> str:
    line = f"trace clock {clock.clock}, {clock.how}"
    if not clock.exact:
        line += (
            " (kernel times may be early by the writers' least export delay, and by the "
            "clock's drift over the capture)"
        )
    return line
