# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The output as a stage of its own: the read loop's ``write`` never waits on the output,
the queue's bounds drop and count, stopping has a deadline even with a stuck output, and
every item handed to it is written, dropped or counted as not delivered."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.join.join_stage import Telemetry
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper import output_stage
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (
    MAX_BATCH_ITEMS,
    OutputStage,
    estimated_bytes,
)
from opentelemetry_exporter_userevents.reader.pipeline.decode_stage import DecodeStage
from opentelemetry_exporter_userevents.reader.pipeline.page_batch import PageBatch
from opentelemetry_exporter_userevents.reader.pipeline.pipeline import Pipeline
from tests.reader.outputs.test_otlp_proto_direct import _joined, _log, _span


class Blocking:
    """An output whose ``write`` waits until released (a collector that never answers);
    counts the items it was given and fails one in ten."""

    sdk_objects = False

    def __init__(self) -> None:
        self.failed = 0
        self.release = threading.Event()
        self.entered = threading.Event()
        self.written: list[Telemetry] = []
        self.closed = False

    def write(self, items: Sequence[Telemetry]) -> None:
        self.entered.set()
        self.release.wait()
        self.written += items
        self.failed += len(items) // 10

    def close(self) -> None:
        self.closed = True


def _spans(n: int) -> list[Any]:
    return _joined(*[_span(span_id=i + 1) for i in range(n)])


def test_a_blocked_output_does_not_block_the_writer() -> None:
    """The read loop's writes all return while the output is stuck in its first write."""
    output = Blocking()
    stage = OutputStage(output, stop_timeout=5)
    returned = threading.Event()

    def produce() -> None:
        for _ in range(50):
            stage.write(_spans(3))
        returned.set()

    threading.Thread(target=produce, daemon=True).start()
    assert returned.wait(30)  # 50 writes while the output is blocked
    assert output.entered.wait(30) and not output.written
    batches, waiting = stage.counts()
    assert waiting["spans"] == 150 and batches == 49  # one in flight
    output.release.set()
    stage.close()
    assert len(output.written) == 150 and output.closed
    assert stage.written["spans"] == 150 and not stage.not_delivered
    assert stage.failed == 0  # 3 // 10 per write
    assert stage.parts() == []


def test_a_full_queue_drops_its_oldest_batches_first_and_counts_them() -> None:
    """The sending queue keeps the newest, as the Collector's does: what is delivered after
    an outage is the latest, and what was dropped is counted by kind."""
    output = Blocking()
    stage = OutputStage(output, stop_timeout=5, max_batches=2)
    stage.write(_spans(1))
    assert output.entered.wait(30)  # the first batch is in flight
    for n in range(5):
        stage.write(_joined(_span(span_id=100 + n), _log()))
    assert stage.dropped == {"output: queue full (oldest dropped)": {"spans": 3, "logs": 3}}
    assert "3 spans and 3 logs dropped (output: queue full (oldest dropped))" in stage.parts()
    output.release.set()
    stage.close()
    spans = [i.checked for i in output.written if type(i.checked).__name__ == "CheckedSpan"]
    assert [span.span_id for span in spans][-2:] == [103, 104]  # the two newest
    assert stage.written == {"spans": 3, "logs": 2}
    # bytes: a bound of two batches' estimate keeps the two newest
    small = OutputStage(Blocking(), stop_timeout=0, max_bytes=2 * estimated_bytes(_spans(2)))
    for _ in range(4):
        small.write(_spans(2))
    assert small.dropped["output: queue full (oldest dropped)"]["spans"] >= 2
    small.close()


def test_the_queue_bounds_drop_and_count_by_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    output = Blocking()
    stage = OutputStage(output, stop_timeout=5, max_batches=4, drop_oldest=False)
    stage.write(_spans(1))
    assert output.entered.wait(30)  # the first batch is in flight
    for _ in range(6):
        stage.write(_joined(_span(), _log()))
    assert stage.dropped == {"output: queue full": {"spans": 2, "logs": 2}}
    assert "2 spans and 2 logs dropped (output: queue full)" in stage.parts()
    assert stage.parts()[0] == "5 spans and 4 logs queued for the output (4 batches)"
    output.release.set()
    stage.close()
    assert stage.written == {"spans": 5, "logs": 4}
    # bytes: a bound of two batches' estimate takes two, drops the third
    small = OutputStage(
        Blocking(), stop_timeout=0, max_bytes=2 * estimated_bytes(_spans(2)), drop_oldest=False
    )
    for _ in range(4):
        small.write(_spans(2))
    assert small.dropped["output: queue full"]["spans"] >= 2
    small.close()


def test_a_large_read_goes_in_bounded_batches() -> None:
    output = Blocking()
    output.release.set()
    stage = OutputStage(output, stop_timeout=5)
    stage.write(_spans(MAX_BATCH_ITEMS * 2 + 1))
    stage.close()
    assert len(output.written) == MAX_BATCH_ITEMS * 2 + 1
    assert output.failed == 2 * (MAX_BATCH_ITEMS // 10)
    assert stage.failed == output.failed


def test_stop_with_a_stuck_output_returns_at_the_deadline_and_counts_what_was_left() -> None:
    output = Blocking()  # never released
    stage = OutputStage(output, stop_timeout=0.5)
    stage.write(_joined(_span(), _span(span_id=5), _log()))
    assert output.entered.wait(30)
    stage.write(_joined(_log(), _log()))
    closed = threading.Event()
    threading.Thread(target=lambda: (stage.close(), closed.set()), daemon=True).start()
    assert closed.wait(30)  # within the documented stop timeout (0.5 s), not forever
    assert stage.not_delivered == {"spans": 2, "logs": 3}
    assert "2 spans and 3 logs not delivered: stop timeout" in stage.parts()
    assert not stage.written and not output.closed
    thread = stage._thread
    assert thread.daemon and thread.is_alive()  # left behind: the process may exit
    output.release.set()  # the output returns late: its batch stays counted once
    thread.join(30)
    assert not stage.written and stage.not_delivered == {"spans": 2, "logs": 3}


def test_an_output_that_raises_is_counted_failed() -> None:
    class Raising(Blocking):
        def write(self, items: Sequence[Telemetry]) -> None:
            raise RuntimeError("a third-party exporter")

    stage = OutputStage(Raising(), stop_timeout=5)
    stage.write(_spans(4))
    stage.close()
    assert stage.failed == 4 and stage.written["spans"] == 4


def test_the_last_writes_wait_for_room_until_the_deadline() -> None:
    """After reading stopped, the final flush is not dropped for a full queue while the
    output drains it within the stop timeout."""
    output = Blocking()
    stage = OutputStage(output, stop_timeout=30, max_batches=1)
    stage.write(_spans(1))
    assert output.entered.wait(30)
    stage.write(_spans(1))  # fills the queue
    stage.stop_by(time.monotonic() + 30)
    threading.Timer(0.2, output.release.set).start()
    stage.write(_spans(1))
    stage.close()
    assert stage.written["spans"] == 3 and not stage.dropped


def test_the_read_loop_hands_batches_to_the_stage_without_waiting() -> None:
    """One step of the record loop with a stuck output returns (today's loop called the
    output's ``write`` in the step)."""

    class Source:
        def read(self) -> PageBatch:
            return PageBatch([], ())

        def discover(self) -> None:
            pass

    class JoinStage:
        def add(self, records: Any) -> list[Any]:
            return _spans(2)

    output = Blocking()
    stage = OutputStage(output, stop_timeout=0.2)
    pipeline = Pipeline(DecodeStage(RecordDecoder(["*"])), JoinStage(), stage, Source())  # type: ignore[arg-type]
    stepped = threading.Event()
    threading.Thread(
        target=lambda: [pipeline.step() for _ in range(3)] and stepped.set(), daemon=True
    ).start()
    assert stepped.wait(30)
    stage.close()
    assert stage.not_delivered["spans"] == 6


def test_the_estimate_grows_with_the_items() -> None:
    small = estimated_bytes(_joined(_span()))
    assert estimated_bytes(_joined(_span(name="x" * 100_000))) >= small + 99_000
    assert estimated_bytes(_spans(10)) == 10 * small
    nested = {"k": [["v" * 1000] * 50]}  # one top-level key: the values inside count too
    assert estimated_bytes(_joined(_log(body=nested))) >= 50_000
    assert estimated_bytes(_joined(_log(attributes=nested))) >= 50_000
    # a large batch is sampled: a batch of hostile items is still estimated at its size
    hostile = _joined(*[_log(body=nested) for _ in range(MAX_BATCH_ITEMS)])
    assert estimated_bytes(hostile) >= MAX_BATCH_ITEMS * 50_000
    plain = _joined(*[_log() for _ in range(MAX_BATCH_ITEMS)])
    assert estimated_bytes(plain) == MAX_BATCH_ITEMS * estimated_bytes(plain[:1])
    assert output_stage.kind_of(_joined(_log())[0]) == "logs"
