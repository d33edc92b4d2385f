# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The pipeline as ``record`` wires it: the formats travel with the pages, so a tracepoint
enabled between two reads of a busy reader is decoded by its workers from its first
record; the stop's deadline covers the workers; only a busy read is followed by another at
once."""

from __future__ import annotations

import io
import json
import os
import random
import re
import signal
import struct
import time
from typing import Any

import pytest

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.capture.decode import decode_bytes
from opentelemetry_exporter_userevents.reader.commands import record as record_command
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.pipeline import (
    decode_stage,
    resource_tracker,
    worker_pool,
)
from opentelemetry_exporter_userevents.reader.pipeline.decode_stage import DecodeStage
from opentelemetry_exporter_userevents.reader.pipeline.page_batch import PageBatch
from opentelemetry_exporter_userevents.reader.pipeline.pipeline import Pipeline
from tests.reader.capture.test_capture import FORMATS, _records
from tests.reader.pipeline.test_worker_pool import (
    FORMAT_TEXTS,
    _chunk_pages,
    _decode,
    _FakeReader,
    _in_process,
    _items,
    _spread,
)
from tests.support.captures import perf_data, perf_sample
from tests.support.span_fixtures import make_logs, make_spans

SPANS, LOGS = 40, 8
"""Copies of the fixtures' spans and logs: more than 64 pages of spans (a busy read)."""


class _EnablingReader(_FakeReader):
    """A live reader whose scan enables tracepoints between reads, as the announcement
    thread does: a format is added to the decoder before its tracepoint is enabled, so a
    read holds records only of tracepoints whose formats were known when it was read."""

    def __init__(self, reads: list, enabled: list[list[tuple[str, str]]]) -> None:
        super().__init__(reads, stop_when_read=True)
        self.decoder = RecordDecoder(["*"])
        self.enabled = enabled
        self.known: list[str] = []

    def _scan(self) -> None:
        for _system, text in self.enabled.pop(0) if self.enabled else []:
            try:
                self.decoder.add(parse_format(text))
            except ValueError:
                continue
            self.known.append(text)

    def read_cpu_pages(self) -> list[tuple[int, bytes]]:
        self._scan()  # enabled just before this read, after the one before
        return super().read_cpu_pages()

    def known_formats(self) -> list[str]:
        return list(self.known)


def _record(reader: _FakeReader, workers: str, monkeypatch) -> tuple:  # type: ignore[no-untyped-def]
    args = cli.parser().parse_args(["record", "--duration", "60", "--no-resource-detection",
                                    "--workers", workers])  # fmt: skip
    monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
    monkeypatch.setattr(record_command, "TraceReader", lambda *a, **k: reader)
    out, err = io.StringIO(), io.StringIO()
    status = record_command.record(args, out, err)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return status, _items(lines, "spans"), _items(lines, "logs"), err.getvalue()


def test_a_tracepoint_enabled_between_busy_reads_is_decoded_by_the_workers(monkeypatch):
    """The first read is busy (the workers start); the log tracepoint is enabled just
    before the second, which holds its first records. Before the pipeline, the workers had
    the second read's pages before the log format (sent after them): every log was lost,
    counted undecodable."""
    _, _, raws = _records(make_spans() * SPANS, make_logs() * LOGS)
    logs = len(make_logs()) * LOGS
    spans_part, logs_part = raws[: -logs - 1], raws[-logs - 1 :]  # the last: not ours
    reads = [_spread(spans_part, 2, 1, [0, 3, 1]), _spread(logs_part, 2, 1, [0, 3, 1])]
    assert len(reads[0]) >= 64
    span_formats = [(s, t) for s, t in FORMATS if "otel_log_" not in t]
    log_formats = [(s, t) for s, t in FORMATS if "otel_log_" in t]
    everything_known = _record(_EnablingReader([list(r) for r in reads], [FORMATS]), "1",
                               monkeypatch)  # fmt: skip
    assert sum(everything_known[2].values()) > 0
    for workers in ("1", "2"):
        reader = _EnablingReader([list(r) for r in reads], [span_formats, log_formats])
        found = _record(reader, workers, monkeypatch)
        assert found[:3] == everything_known[:3]
        assert _counts(found[3]) == _counts(everything_known[3])


def _counts(summary: str) -> str:
    """The summary without its times and rates."""
    return re.sub(r"in [0-9.]+ s \([0-9.,]+/s\)", "", summary)


@pytest.mark.parametrize("started", [True, False], ids=["started", "never-started"])
def test_the_stop_deadline_covers_a_stuck_or_starting_worker(started):
    """A worker that does not answer when the reader stops is killed at the stop's
    deadline, however long the wait for a stuck worker (:data:`.RESULT_WAIT`, 60 s) or a
    starting one (:data:`.START_WAIT`, 600 s), and the chunks it held are decoded here:
    nothing is lost, and a slow worker is not a failure."""
    pages = _chunk_pages()
    pool = worker_pool.WorkerPool(1, ["*"], PageLayout())
    process = pool._processes[0]
    try:
        if started:
            assert pool.result(pool.submit(pages[:1], FORMAT_TEXTS)) == _in_process(pages[:1])
        os.kill(process.pid, signal.SIGSTOP)  # alive, never answers (still importing, or not)
        tickets = [pool.submit([page], FORMAT_TEXTS) for page in pages[: worker_pool.WINDOW]]
        deadline = time.monotonic() + 0.5
        got = [record for ticket in tickets for record in pool.result(ticket, deadline)]
    finally:
        pool.close(time.monotonic())
    assert got == _in_process(pages[: worker_pool.WINDOW])
    assert process.exitcode == -signal.SIGKILL
    assert pool.stopped_late_pages == worker_pool.WINDOW and pool.lost_pages == 0
    assert pool.error() is None


def test_close_waits_for_all_the_workers_together_until_its_deadline():
    """Before, ``close`` gave each worker 5 s in turn."""
    pool = worker_pool.WorkerPool(2, ["*"], PageLayout())
    processes = list(pool._processes)
    for process in processes:
        os.kill(process.pid, signal.SIGSTOP)  # they never see their pipe close
    pool.close(time.monotonic() + 0.2)
    assert all(process.exitcode == -signal.SIGKILL for process in processes)


def test_the_pool_leaves_no_resource_tracker_behind():
    """A command that started workers exits leaving no process holding its output: the
    resource tracker the workers made start is stopped with them."""
    resource_tracker.stop_tracker()  # one an earlier test's multiprocessing left
    assert resource_tracker.tracker_pid() is None
    pool = worker_pool.WorkerPool(1, ["*"], PageLayout())
    tracker = resource_tracker.tracker_pid()
    assert tracker is not None
    pool.close()
    assert resource_tracker.tracker_pid() is None
    try:
        os.kill(tracker, 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"the resource tracker {tracker} is still running")


FINISHED_ROUND = struct.pack("<IHH", 68, 0, 8)
"""perf's PERF_RECORD_FINISHED_ROUND: the end of a round."""


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_decode_of_a_perf_data_with_workers_writes_what_it_writes_in_process(
    tmp_path, monkeypatch, seed
):
    """A perf.data's samples go to the workers in chunks (never across a round's end),
    and come back ordered by perf's rounds as in-process: the same spans, logs and counts,
    even where timestamps run backwards across rounds (a hostile file: the rounds' rule
    broken), with records not ours and damaged ones among them."""
    monkeypatch.setattr(decode_stage, "WORKERS_FROM", 0)
    _, _, raws = _records(make_spans() * 5, make_logs() * 3)
    shuffle = random.Random(seed)
    records = []
    for n, raw in enumerate(raws):
        if shuffle.random() < 0.1:
            raw = raw[:6]  # too short: undecodable
        records.append(perf_sample(raw, 10_000 + shuffle.randrange(-300, 300) + 5 * n, n % 2))
        if shuffle.random() < 0.2:
            records.append(FINISHED_ROUND)
    path = tmp_path / "perf.data"
    path.write_bytes(perf_data(FORMATS, records))
    pools: list[int] = []

    class Pool(worker_pool.WorkerPool):
        def __init__(self, count: int, *args: Any, **kwargs: Any) -> None:
            pools.append(count)
            super().__init__(count, *args, **kwargs)

    monkeypatch.setattr(decode_stage, "WorkerPool", Pool)
    one = _decode(str(path), "--workers", "1")
    assert "(perf.data)" in str(one[2]) and sum(one[0].values()) > 0
    for count in ("2", "3"):
        assert _decode(str(path), "--workers", count) == one
    assert pools == [2, 3]  # the workers decoded them
    in_process = decode_bytes(path.read_bytes(), ["*"]).records
    capture = decode_bytes(path.read_bytes(), ["*"])
    stage = decode_stage.DecodeStage(capture.decoder, 2)
    try:
        with_workers = list(stage.capture_records(capture))
    finally:
        stage.close()
    order = [(r.timestamp, r.pid) for r in in_process]
    assert [(r.timestamp, r.pid) for r in with_workers] == order  # perf's rounds, as in-process
    assert order != sorted(order)  # the rounds' rule broken: not merely sorted


def test_at_the_stop_a_full_window_waits_for_room_only_until_the_deadline(monkeypatch):
    """The stop's last read hands its chunks to workers whose window may be full: the wait
    for room ends at the stop's deadline too (the stuck worker killed there and its chunks
    decoded here, not at :data:`.RESULT_WAIT` as a failure)."""
    monkeypatch.setattr(worker_pool, "RESULT_WAIT", 30.0)
    pages = _chunk_pages()
    pool = worker_pool.WorkerPool(1, ["*"], PageLayout())
    process = pool._processes[0]
    try:
        assert pool.result(pool.submit(pages[:1], FORMAT_TEXTS)) == _in_process(pages[:1])
        os.kill(process.pid, signal.SIGSTOP)  # started, then never answers
        held = [pool.submit([page], FORMAT_TEXTS) for page in pages[: worker_pool.WINDOW]]
        deadline = time.monotonic() + 0.5
        last = pool.submit(pages[-1:], FORMAT_TEXTS, deadline)  # no room: waits for it
        got = [record for ticket in [*held, last] for record in pool.result(ticket, deadline)]
    finally:
        pool.close(time.monotonic())
    assert got == _in_process([*pages[: worker_pool.WINDOW], *pages[-1:]])
    assert pool.stopped_late_pages == worker_pool.WINDOW and pool.error() is None


class _Source:
    """A live source whose reads give ``pages`` each time."""

    def __init__(self, pages: list[tuple[int, bytes]]) -> None:
        self.pages = pages

    def read(self) -> PageBatch:
        return PageBatch(self.pages, ())

    def discover(self) -> None:
        pass


class _Delivery:
    failed = 0

    def write(self, items: list) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("cpus", "busy"),
    [([], False), ([0], False), ([0, 1, 2], False), ([0, 0], True), ([1, 0, 1], True)],
)
def test_a_read_of_a_page_or_less_per_cpu_is_not_busy(cpus: list[int], busy: bool):
    """``record`` reads again at once only after a busy read (a CPU gave a full page and
    more); after any other it idles a poll interval, as it does after an empty one."""
    empty = struct.pack("<QQ", 0, 0) + b"\0" * 4080
    source = _Source([(cpu, empty) for cpu in cpus])
    pipeline = Pipeline(DecodeStage(RecordDecoder()), JoinStage(), _Delivery(), source)
    assert pipeline.step() is busy
