# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``--workers``: the same spans and logs, each with its resource and scope, and the same
counts as in-process, over good, hostile and random pages; a dead or stuck worker costs no
page (its chunks are decoded in-process) and is a clear error and a non-zero exit, never a
hang; a stop while workers start loses nothing; memory bounded by the pool's window."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.commands import capture as capture_command
from opentelemetry_exporter_userevents.reader.commands import common
from opentelemetry_exporter_userevents.reader.commands import record as record_command
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats, RecordDecoder
from opentelemetry_exporter_userevents.reader.decode.validation import RecordChecker
from opentelemetry_exporter_userevents.reader.live.eventheader_providers import ProviderDiscovery
from opentelemetry_exporter_userevents.reader.pipeline import (
    decode_stage,
    worker_count,
    worker_loop,
)
from opentelemetry_exporter_userevents.reader.pipeline import worker_pool as workers
from tests.reader.capture.test_capture import FORMATS, _capture, _records
from tests.support.otlp import flatten
from tests.support.pages import data_event, page
from tests.support.span_fixtures import make_logs, make_spans

ROOT = Path(__file__).resolve().parents[3]
FORMAT_TEXTS = [text for _system, text in FORMATS]


@pytest.fixture(autouse=True)
def _workers_for_any_size(monkeypatch):
    monkeypatch.setattr(decode_stage, "WORKERS_FROM", 0)


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


def test_the_tree_view_and_exporters_decode_in_process_and_so_by_default_the_native_core():
    args = cli.parser().parse_args(["decode", "x", "--format", "tree", "--workers", "3"])
    assert capture_command.workers_of(args) == 1
    args = cli.parser().parse_args(["decode", "x", "--workers", "3"])
    assert capture_command.workers_of(args) == 3
    default = cli.parser().parse_args(["record"])
    native = common.reader_core().core is not None
    assert capture_command.workers_of(default) == (1 if native else worker_count.default_workers())
    default = cli.parser().parse_args(["record", "--kernel", "sched"])
    assert capture_command.workers_of(default) == worker_count.default_workers()
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["record", "--workers", "0"])


def _chunk_pages() -> list[bytes]:
    """Pages of spans, logs and their resource, one record a page."""
    _, _, raws = _records()
    return [raw for _cpu, raw in _spread(raws, 1, 1, [0])]


def _in_process(pages: list[bytes]) -> list:
    decoder = RecordDecoder(["*"])
    worker_loop.add_formats(decoder, [text for _system, text in FORMATS])
    return worker_loop.decode_chunk(decoder, RecordChecker(), pages)[0]


def test_a_killed_workers_chunks_are_decoded_in_process_and_reported():
    pages = _chunk_pages()
    pool = workers.WorkerPool(2, ["*"], PageLayout())
    try:
        os.kill(pool._processes[1].pid, signal.SIGKILL)
        tickets = [pool.submit([page], FORMAT_TEXTS) for page in pages]
        got = [record for ticket in tickets for record in pool.result(ticket)]
    finally:
        pool.close()
    assert got == _in_process(pages)  # every record, the dead worker's too
    assert pool.recovered_pages > 0 and pool.lost_pages == 0
    assert pool.stats.pages == len(pages)
    error = str(pool.error())
    assert re.fullmatch(r"decoding worker 1 \(pid \d+\) was killed by SIGKILL; the \d+ pages "
                        r"it held were decoded in-process", error), error  # fmt: skip
    assert pool._processes == []


@pytest.mark.parametrize("started", [True, False], ids=["started", "never-started"])
def test_a_stuck_worker_is_killed_and_its_chunks_decoded_in_process(monkeypatch, started):
    monkeypatch.setattr(workers, "RESULT_WAIT", 2.0)
    monkeypatch.setattr(workers, "START_WAIT", 3.0)
    pages = _chunk_pages()
    pool = workers.WorkerPool(1, ["*"], PageLayout())
    process = pool._processes[0]
    try:
        if started:
            assert pool.result(pool.submit(pages[:1], FORMAT_TEXTS)) == _in_process(pages[:1])
        os.kill(process.pid, signal.SIGSTOP)  # alive, never answers (still importing, or not)
        assert pool.result(pool.submit(pages, FORMAT_TEXTS)) == _in_process(pages)
    finally:
        pool.close()
    assert process.exitcode == -signal.SIGKILL
    # never-started: unless the worker had started before the SIGSTOP (a loaded host
    # descheduled this test that long); then it is the started case
    why = "sent nothing for 2 s" if pool._started[0] else "did not start in 3 s"
    assert pool._started[0] or not started
    assert re.fullmatch(rf"decoding worker 0 \(pid \d+\) {why} \(killed\); the {len(pages)} "
                        "pages it held were decoded in-process", str(pool.error()))  # fmt: skip
    assert pool.recovered_pages == len(pages)


def test_decode_with_a_dead_worker_writes_every_record_and_exits_non_zero(tmp_path, monkeypatch):
    _, _, raws = _records(make_spans() * 3, make_logs() * 3)
    path = _capture(tmp_path, _spread(raws, 2, 1, [0]))
    one = _decode(path, "--workers", "1")
    real = workers.WorkerPool.submit

    def submit_then_die(self, pages, formats):
        ticket = real(self, pages, formats)
        if ticket == 2:
            os.kill(self._processes[0].pid, signal.SIGKILL)
        return ticket

    monkeypatch.setattr(workers.WorkerPool, "submit", submit_then_die)
    monkeypatch.setattr(workers, "CHUNK_PAGES", 1)
    spans, logs, summary, status = _decode(path, "--workers", "2")
    assert (spans, logs) == one[:2] and status == 1
    assert summary.startswith(one[2])  # type: ignore[attr-defined] # the same counts
    error = summary[len(one[2]) :]  # type: ignore[index]
    dead = r"otel-userevents: decoding worker 0 \(pid \d+\) was killed by SIGKILL"
    assert re.fullmatch(rf"{dead}; the \d+ pages it held were decoded in-process\n", error), error


def test_the_main_process_decodes_while_its_worker_starts():
    """A worker still starting (here: stopped before its imports end) holds its window of
    chunks; the main process decodes the next ones itself instead of waiting, the same
    records, and hands chunks out again once the worker answers."""
    pages = _chunk_pages()
    pool = workers.WorkerPool(1, ["*"], PageLayout())
    process = pool._processes[0]
    try:
        os.kill(process.pid, signal.SIGSTOP)  # a spawned interpreter takes far longer
        tickets = [pool.submit([page], FORMAT_TEXTS) for page in pages]
        assert pool.decoded_here == len(pages) - workers.WINDOW  # all but its window
        os.kill(process.pid, signal.SIGCONT)
        got = [record for ticket in tickets for record in pool.result(ticket)]
        assert pool.result(pool.submit(pages[:1], FORMAT_TEXTS)) == _in_process(
            pages[:1]
        )  # its turn
    finally:
        pool.close()
    assert got == _in_process(pages)
    assert pool.error() is None and pool.recovered_pages == 0
    assert pool.decoded_here == len(pages) - workers.WINDOW
    assert pool.stats.pages == len(pages) + 1


def test_chunks_in_flight_are_bounded_by_the_window():
    pool = workers.WorkerPool(2, ["*"], PageLayout())
    most = 0
    try:
        tickets = []
        for _ in range(20):
            tickets.append(pool.submit([bytes(4096)] * 4, FORMAT_TEXTS))
            most = max(most, *pool._in_flight)
        assert most <= workers.WINDOW
        assert all(pool.result(t) == [] for t in tickets)
        assert pool.stats.pages == 80  # empty pages: no record, nothing corrupt
    finally:
        pool.close()


def test_workers_ignore_ctrl_c_and_stop_when_their_pipe_closes():
    pool = workers.WorkerPool(1, ["*"], PageLayout())
    process = pool._processes[0]
    pool.result(pool.submit([bytes(4096)], FORMAT_TEXTS))  # started: its handlers are set
    os.kill(process.pid, signal.SIGINT)
    assert pool.result(pool.submit([bytes(4096)], FORMAT_TEXTS)) == []
    pool.close()
    assert process.exitcode == 0


class _FakeReader:
    """Pages as a live reader hands them: a read per call, then nothing."""

    def __init__(self, reads: list[list[tuple[int, bytes]]], stop_when_read: bool = False) -> None:
        """``stop_when_read``: SIGTERM once every read was taken (the reader idles), so
        a test that compares runs never depends on how many reads fit in a duration (a
        busy read that starts workers takes long on a loaded host, and the stop takes
        one read)."""
        self.reads = reads
        self.stop_when_read = stop_when_read
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

    def read_cpu_pages(self) -> list[tuple[int, bytes]]:
        return self.reads.pop(0) if self.reads else []

    def known_formats(self) -> list[str]:
        return FORMAT_TEXTS

    def discover(self) -> None:
        pass

    def wait(self, seconds: float) -> None:
        if self.stop_when_read and not self.reads:
            signal.raise_signal(signal.SIGTERM)

    def close(self) -> None:
        pass

    def late_services(self) -> list[object]:
        return []

    def late_providers(self) -> list[object]:
        return []

    @property
    def providers(self) -> ProviderDiscovery:
        return ProviderDiscovery(())


def test_record_with_workers_writes_what_it_writes_in_process(monkeypatch):
    _, _, raws = _records(make_spans() * 20, make_logs() * 20)
    pages = _spread(raws, 2, 1, [0, 3, 1])
    reads = [pages[:70], pages[70:140], pages[140:]]  # the first busy: workers start
    results = []
    for count in ("1", "2"):
        args = cli.parser().parse_args(["record", "--duration", "60",
                                        "--no-resource-detection", "--workers", count])  # fmt: skip
        monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
        reader = _FakeReader(list(reads), stop_when_read=True)
        monkeypatch.setattr(record_command, "TraceReader", lambda *a, reader=reader, **k: reader)
        out, err = io.StringIO(), io.StringIO()
        assert record_command.record(args, out, err) == 0
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        summary = re.sub(r"in [0-9.]+ s \([0-9.,]+/s\)", "", err.getvalue())
        results.append((_items(lines, "spans"), _items(lines, "logs"), summary))
    assert results[0] == results[1]
    assert "without resource" not in results[0][2]


def test_decoder_stats_add_up():
    stage = decode_stage.DecodeStage(RecordDecoder(["*"]))
    stage.pool = SimpleNamespace(stats=DecoderStats(1, 2, 3, 4, 5, 6))  # type: ignore[assignment]
    stage._add_pool_stats()
    stage._add_pool_stats()  # moved, not added twice
    assert stage.decoder.stats == DecoderStats(1, 2, 3, 4, 5, 6)


def _two_reads() -> list[list[tuple[int, bytes]]]:
    """Two reads, the first busy (the workers start after it)."""
    _, _, raws = _records(make_spans() * 20, make_logs() * 20)
    pages = _spread(raws, 2, 1, [0, 3, 1])
    return [pages[:70], pages[70:]]


def _stop_while_workers_start(count: str, reads_path: str) -> int:
    """``record --workers COUNT`` over the reads pickled in ``reads_path``, with Ctrl-C
    sent to the process group the moment the workers are started, while they import; in a
    process of its own (see the test below). Lines to stdout, the summary to stderr, its
    exit status returned."""
    with open(reads_path, "rb") as f:
        reader = _FakeReader(pickle.load(f))
    record_command.tracefs_of = lambda args: None  # type: ignore[assignment]
    record_command.TraceReader = lambda *a, **k: reader  # type: ignore[assignment,misc]
    started = workers.WorkerPool.__init__

    def start_then_stop(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        started(self, *args, **kwargs)
        os.killpg(0, signal.SIGINT)  # the workers too, as a terminal's Ctrl-C

    workers.WorkerPool.__init__ = start_then_stop  # type: ignore[method-assign]
    args = cli.parser().parse_args(["record", "--duration", "60", "--no-resource-detection",
                                    "--workers", count])  # fmt: skip
    return record_command.record(args, sys.stdout, sys.stderr)


def _summary_line(err: str) -> str:
    """The summary, not the line that said the reader listens."""
    (line,) = [line for line in err.splitlines() if line.startswith("otel-userevents: stopped")]
    return line


def test_a_stop_while_workers_start_loses_no_page(tmp_path, monkeypatch):
    """Four workers started at once, Ctrl-C to the whole process group at once: they are
    still starting (an interpreter and its imports). Every page read is written and
    counted, as in-process, and nothing failed."""
    reads = _two_reads()
    (tmp_path / "reads").write_bytes(pickle.dumps(reads))
    code = "; ".join(
        [
            "import sys, tests.reader.pipeline.test_worker_pool as t",
            "sys.exit(t._stop_while_workers_start(*sys.argv[1:]))",
        ]
    )
    child = subprocess.run([sys.executable, "-c", code, "4", str(tmp_path / "reads")],
                           capture_output=True, text=True, timeout=300, start_new_session=True,
                           cwd=ROOT)  # fmt: skip
    assert child.returncode == 0, child.stderr
    lines = [json.loads(line) for line in child.stdout.splitlines()]
    summary = re.sub(r"in [0-9.]+ s \([0-9.,]+/s\)", "", _summary_line(child.stderr))
    assert "stopped (interrupted)" in summary and "lost 0" in summary

    args = cli.parser().parse_args(["record", "--duration", "0.3", "--no-resource-detection",
                                    "--workers", "1"])  # fmt: skip
    monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
    reader = _FakeReader(reads)
    monkeypatch.setattr(record_command, "TraceReader", lambda *a, **k: reader)
    out, err = io.StringIO(), io.StringIO()
    assert record_command.record(args, out, err) == 0
    one = [json.loads(line) for line in out.getvalue().splitlines()]
    assert _items(lines, "spans") == _items(one, "spans") != Counter()
    assert _items(lines, "logs") == _items(one, "logs") != Counter()
    counts = re.sub(r"in [0-9.]+ s \([0-9.,]+/s\)", "", _summary_line(err.getvalue()))
    assert summary.split(": ", 2)[2] == counts.split(": ", 2)[2]  # after "stopped (...)"
