# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``--workers``: the same spans and logs, each with its resource and scope, and the same
counts as in-process, over good, hostile and random pages; a dead worker is a clear error
and a non-zero exit, never a hang; memory bounded by the pool's window."""

from __future__ import annotations

import io
import json
import os
import re
import signal
from collections import Counter
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader import cli, workers
from opentelemetry_exporter_userevents.reader.commands import capture as capture_command
from opentelemetry_exporter_userevents.reader.commands import record as record_command
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats, RecordDecoder
from tests.reader.capture.test_capture import FORMATS, _capture, _records
from tests.support.otlp import flatten
from tests.support.pages import data_event, page
from tests.support.span_fixtures import make_logs, make_spans


@pytest.fixture(autouse=True)
def _workers_for_any_size(monkeypatch):
    monkeypatch.setattr(capture_command, "WORKERS_FROM", 0)


def _items(lines: list[dict], kind: str) -> Counter[str]:
    """Every span or log with its resource and scope, as :func:`flatten` gives them, one at
    a time (so the same record written twice counts twice)."""
    keys = {"spans": ("resourceSpans", "scopeSpans", "spans"),
            "logs": ("resourceLogs", "scopeLogs", "logRecords")}[kind]  # fmt: skip
    found: Counter[str] = Counter()
    for line in lines:
        for resource in line.get(keys[0], ()):
            for scope in resource.get(keys[1], ()):
                for item in scope.get(keys[2], ()):  # one request of it: flatten's text
                    request = {keys[0]: [{**resource, keys[1]: [{**scope, keys[2]: [item]}]}]}
                    found.update(flatten([request], kind).values())
    return found


def _decode(path: str, *flags: str) -> tuple[object, ...]:
    out, err = io.StringIO(), io.StringIO()
    args = cli.parser().parse_args(["decode", path, *flags])
    status = capture_command.decode(args, out, err)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    summary = re.sub(r" in [0-9.]+ s", "", err.getvalue())  # the time it took
    return _items(lines, "spans"), _items(lines, "logs"), summary, status


def _decode_flat(path: str, *flags: str) -> tuple[object, ...]:
    out = io.StringIO()
    args = cli.parser().parse_args(["decode", path, *flags])
    capture_command.decode(args, out, io.StringIO())
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return flatten(lines, "spans"), flatten(lines, "logs")


def _same_with_workers(path: str) -> str:
    one = _decode(path, "--workers", "1")
    for count in ("2", "3"):
        assert _decode(path, "--workers", count) == one
    return one[2]


def _spread(raws: list[bytes], cpus: int, per_page: int, order: list[int]) -> list:
    """Records over ``cpus`` CPUs, ``per_page`` a page, timestamps interleaved across CPUs
    in ``order`` (equal timestamps too)."""
    pages = []
    for n in range(0, len(raws), per_page):
        cpu = (n // per_page) % cpus
        ts = 1000 + order[n // per_page % len(order)]
        pages.append((cpu, page(ts, [data_event(0, raw) for raw in raws[n : n + per_page]])))
    return pages


def test_decode_with_workers_writes_the_same_spans_logs_and_counts(tmp_path):
    spans, logs = make_spans() * 5, make_logs() * 5
    _, _, raws = _records(spans, logs)
    raws = raws[1:] + raws[:1]  # the resource last: every record waits for it
    summary = _same_with_workers(_capture(tmp_path, _spread(raws, 2, 3, [0, 5, 5, 2])))
    assert f"{len(spans)} spans and {len(logs)} logs rebuilt" in summary


def test_records_without_resource_invalid_and_foreign_are_counted_alike(tmp_path):
    spans, logs, raws = _records()
    bad = bytearray(raws[1])
    bad[-40:-30] = b"\xff" * 10  # a text no longer what its schema says
    raws = raws[1:] + [bytes(bad)]  # no resource at all
    summary = _same_with_workers(_capture(tmp_path, _spread(raws, 3, 2, [3, 1, 2])))
    assert "without resource" in summary


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.data(),
    cpus=st.integers(1, 4),
    per_page=st.integers(1, 6),
    order=st.lists(st.integers(0, 20), min_size=1, max_size=8),
)
def test_random_and_hostile_pages_give_the_same_output_and_counts(
    tmp_path_factory, data, cpus, per_page, order
):
    _, _, raws = _records()
    raws = data.draw(st.permutations(raws))
    mutated = []
    for raw in raws:  # bytes flipped anywhere past the header: bad texts, bad sizes, ids
        raw = bytearray(raw)
        for _ in range(data.draw(st.integers(0, 2))):
            raw[data.draw(st.integers(8, len(raw) - 1))] = data.draw(st.integers(0, 255))
        mutated.append(bytes(raw))
    pages = _spread(mutated, cpus, per_page, order)
    garbage = data.draw(st.lists(st.binary(min_size=4096, max_size=4096), max_size=2))
    pages += [(0, blob) for blob in garbage]  # corrupt pages among good ones
    path = _capture(tmp_path_factory.mktemp("c"), pages, FORMATS)
    _same_with_workers(path)
    assert _decode_flat(path, "--workers", "2") == _decode_flat(path, "--workers", "1")


def test_the_tree_view_and_exporters_decode_in_process():
    args = cli.parser().parse_args(["decode", "x", "--format", "tree", "--workers", "3"])
    assert capture_command.workers_of(args) == 1
    args = cli.parser().parse_args(["decode", "x", "--workers", "3"])
    assert capture_command.workers_of(args) == 3
    assert cli.parser().parse_args(["record"]).workers == workers.default_workers()
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["record", "--workers", "0"])


def test_a_killed_worker_is_a_clear_error_not_a_hang():
    pool = workers.WorkerPool(2, ["*"], PageLayout())
    try:
        os.kill(pool._processes[1].pid, signal.SIGKILL)
        with pytest.raises(workers.WorkerError, match=r"worker 1 .* killed by SIGKILL"):
            for _ in range(4):
                pool.result(pool.submit([bytes(4096)]))
    finally:
        pool.close()
    assert pool._processes == []


def test_decode_reports_a_dead_worker_and_exits_non_zero(tmp_path, monkeypatch):
    _, _, raws = _records(make_spans() * 3, make_logs() * 3)
    path = _capture(tmp_path, _spread(raws, 2, 1, [0]))
    real = workers.WorkerPool.submit

    def submit_then_die(self, pages):
        ticket = real(self, pages)
        if ticket == 2:
            os.kill(self._processes[0].pid, signal.SIGKILL)
        return ticket

    monkeypatch.setattr(workers.WorkerPool, "submit", submit_then_die)
    monkeypatch.setattr(workers, "CHUNK_PAGES", 1)
    err = io.StringIO()
    args = cli.parser().parse_args(["decode", path, "--workers", "2"])
    assert capture_command.decode(args, io.StringIO(), err) == 1
    assert "killed by SIGKILL; its records are lost" in err.getvalue()


def test_chunks_in_flight_are_bounded_by_the_window():
    pool = workers.WorkerPool(2, ["*"], PageLayout())
    most = 0
    try:
        tickets = []
        for _ in range(20):
            tickets.append(pool.submit([bytes(4096)] * 4))
            most = max(most, *pool._in_flight)
        assert most <= workers.WINDOW
        assert all(pool.result(t) == [] for t in tickets)
        assert pool.stats.pages == 80  # empty pages: no record, nothing corrupt
    finally:
        pool.close()


def test_workers_ignore_ctrl_c_and_stop_when_their_pipe_closes():
    pool = workers.WorkerPool(1, ["*"], PageLayout())
    process = pool._processes[0]
    pool.result(pool.submit([bytes(4096)]))  # started: its handlers are set
    os.kill(process.pid, signal.SIGINT)
    assert pool.result(pool.submit([bytes(4096)])) == []
    pool.close()
    assert process.exitcode == 0


class _FakeReader:
    """Pages as a live reader hands them: a read per call, then nothing."""

    def __init__(self, reads: list[list[tuple[int, bytes]]]) -> None:
        self.reads = reads
        self.prefixes = ("*",)
        self.decoder = RecordDecoder(["*"])
        for _system, text in FORMATS:
            try:
                self.decoder.add(parse_format(text))
            except ValueError:
                pass
        self.filter_rejected: dict[str, str] = {}
        self.incompatible: dict[str, str] = {}
        self.announcement_error = None
        self.instance = "fake"
        self.cleanup_error = None
        self.lost = 0
        self.first_loss = self.last_loss = None
        self.found_later_not_remembered = 0
        self.announcements = None

    def start(self) -> None:
        pass

    def capture(self) -> list[tuple[int, bytes]]:
        return self.reads.pop(0) if self.reads else []

    def read(self) -> list:
        records: list = []
        for _cpu, raw in self.capture():
            self.decoder.decode_page(raw, records)
        records.sort(key=lambda record: record.timestamp)
        return records

    def formats(self) -> list[tuple[str, str]]:
        return FORMATS

    def wait(self, seconds: float) -> None:
        pass

    def close(self) -> None:
        pass

    def late_services(self) -> list[object]:
        return []


def test_record_with_workers_writes_what_it_writes_in_process(monkeypatch):
    _, _, raws = _records(make_spans() * 20, make_logs() * 20)
    pages = _spread(raws, 2, 1, [0, 3, 1])
    reads = [pages[:70], pages[70:140], pages[140:]]  # the first busy: workers start
    results = []
    for count in ("1", "2"):
        args = cli.parser().parse_args(["record", "--duration", "0.3",
                                        "--no-resource-detection", "--workers", count])  # fmt: skip
        monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
        reader = _FakeReader(list(reads))
        monkeypatch.setattr(record_command, "TraceReader", lambda *a, reader=reader, **k: reader)
        out, err = io.StringIO(), io.StringIO()
        assert record_command.record(args, out, err) == 0
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        summary = re.sub(r"in [0-9.]+ s \([0-9]+/s\)", "", err.getvalue())
        results.append((_items(lines, "spans"), _items(lines, "logs"), summary))
    assert results[0] == results[1]
    assert "without resource" not in results[0][2]


def test_decoder_stats_add_up():
    stats = DecoderStats()
    pool = SimpleNamespace(stats=DecoderStats(1, 2, 3, 4, 5))
    capture_command._add_stats(stats, pool)  # type: ignore[arg-type]
    assert stats == DecoderStats(1, 2, 3, 4, 5)
