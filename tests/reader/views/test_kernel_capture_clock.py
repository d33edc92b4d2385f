# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A capture's clock onto the spans': what the file says, used exactly; otherwise the
estimate from our spans, which a lying writer moves only with a majority of threads."""

from __future__ import annotations

from opentelemetry_exporter_userevents.reader.views.kernel_capture_clock import (
    ClockEstimate,
    map_clock,
)

SECOND = 1_000_000_000


def _estimate(*spans: tuple[int, int, int]) -> ClockEstimate:
    estimate = ClockEstimate()
    for stamp, tid, end in spans:
        estimate.add(stamp, tid, end)
    return estimate


def test_realtime_and_a_reference_reading_are_used_exactly():
    lying = _estimate((100, 1, 10**18))  # ignored: the file says
    assert map_clock("realtime", None, lying).offset_ns == 0
    mono = map_clock("mono", (1_700_000_000 * SECOND, 5 * SECOND), lying)
    assert mono.offset_ns == 5 * SECOND - 1_700_000_000 * SECOND and mono.exact


def test_tai_is_the_spans_clock_plus_whole_seconds():
    tai = map_clock("tai", None, _estimate((37 * SECOND + 1000 + 250_000, 1, 1000)))
    assert tai.offset_ns == 37 * SECOND and tai.exact


def test_another_clock_is_the_least_delay_of_each_thread_the_median_over_threads():
    offset = 123 * SECOND
    spans = [(offset + end + delay, tid, end) for tid, delays in
             ((1, (9_000, 4_000)), (2, (5_000, 30_000)), (3, (6_000,)))
             for end, delay in zip((10, 20), delays, strict=False)]  # fmt: skip
    clock = map_clock("local", None, _estimate(*spans))
    assert clock.offset_ns == offset + 5_000  # least delays 4, 5, 6 µs: the median
    assert not clock.exact and "estimated from 5 spans of 3 threads" in clock.how


def test_a_thread_that_lies_about_its_end_times_does_not_move_the_estimate():
    offset = 50 * SECOND
    honest = [(offset + 1000 + 7_000, tid, 1000) for tid in (1, 2, 3)]
    lying = [(offset, 9, 10**15)]  # an end time far in the future: a huge negative delay
    assert map_clock("local", None, _estimate(*honest, *lying)).offset_ns == offset + 7_000


def test_the_estimate_keeps_a_bounded_number_of_threads():
    estimate = ClockEstimate(max_threads=4)
    for tid in range(10):
        estimate.add(100, tid, 50)
    estimate.add(100, 0, "not a time")  # a value of another type is not a span's end
    assert estimate.threads == 4 and estimate.threads_not_counted == 6


def test_without_spans_nothing_is_estimated():
    clock = map_clock(None, None, ClockEstimate())
    assert clock.offset_ns == 0 and clock.clock == "unknown" and not clock.exact
