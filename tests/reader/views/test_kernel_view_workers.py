# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record --kernel`` with ``--workers``: the same spans, kernel views and counts as
in-process, from the same pages and the same kernel events (the workers send spans back
checked, and the kernel view adds to them in the main process, in the order in-process
does); the kernel test proves the figures live."""

from __future__ import annotations

import functools
import io
import json
import re
from collections import Counter
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD, PageLayout
from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.commands import record as record_command
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.decode.validation import RecordChecker
from opentelemetry_exporter_userevents.reader.pipeline import decode_stage, worker_loop
from opentelemetry_exporter_userevents.reader.views import kernel_events
from opentelemetry_exporter_userevents.reader.views.kernel_events import KernelEvents
from opentelemetry_exporter_userevents.reader.views.kernel_processes import ProcessKey
from tests.reader.capture.test_capture import (
    FORMATS,
    RESOURCE_ID,
    SPAN_ID,
    _records,
    _resource_payload,
)
from tests.reader.capture.test_capture_eventheader import EH_FORMATS, RUST_ID
from tests.reader.pipeline.test_worker_pool import _FakeReader, _items, _spread
from tests.reader.views.test_kernel_view import _Formats, _record
from tests.support.eventheader_captures import eventheader_record, rust_span
from tests.support.pages import record
from tests.support.span_fixtures import RESOURCE, make_logs

MS = 1_000_000
BASE = 1_700_000_000 * 10**9
APP, NEIGHBOUR = ProcessKey(7, 1), ProcessKey(9, 2)
PROCESSES = {7: APP, 8: APP, 9: NEIGHBOUR}
"""Threads 7 and 8 of one app, 9 of another process."""
SPANS = 240


@functools.cache
def _raws() -> list[bytes]:
    """A resource, then spans written by threads 7, 8 and 9 in turn, 10 ms apart: some
    name thread 8 (of 7's process: summed over it; of 9's: refused), some set
    ``thread.id`` (the app's own). Made once: both runs read the same ids."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("work")
    writers = []
    for n in range(SPANS):
        writer = (7, 8, 9)[n % 3]
        attributes: dict[str, Any] = {"n": n}
        if n % 5 == 0:
            attributes["linux.thread.id"] = 8
        if n % 7 == 0:
            attributes["thread.id"] = 139_872_386_463_296 + n
        start = BASE + n * 10 * MS
        span = tracer.start_span(f"span {n}", start_time=start, attributes=attributes)
        span.end(end_time=start + (3 + n % 4) * MS)
        writers.append(writer)
    provider.shutdown()
    rid, resource = _resource_payload()
    raws = [record(RESOURCE_ID, resource)]
    for span, writer in zip(memory.get_finished_spans(), writers, strict=True):
        raws.append(record(SPAN_ID, encode_span(span, rid, FTRACE_MAX_PAYLOAD)[0], pid=writer))
    return raws


def _kernel_records() -> list[tuple[int, memoryview]]:
    """Each thread on and off its CPU in a pattern of its own (so a span summed over the
    wrong thread shows), with a ``futex`` call in each stretch off it."""
    switch = "sched/sched_switch"
    out = []
    for tid, (on, off) in {7: (1, 1), 8: (3, 1), 9: (1, 4)}.items():
        at = BASE - 5 * MS
        while at < BASE + SPANS * 10 * MS:
            out.append((at, _record(switch, prev_pid=1, prev_state=1, next_pid=tid)))
            at += on * MS
            out.append((at, _record("syscalls/sys_enter_futex", common_pid=tid)))
            out.append((at + 1, _record(switch, prev_pid=tid, prev_state=1, next_pid=1)))
            at += off * MS
            out.append((at - 1, _record("sched/sched_wakeup", common_pid=1, pid=tid)))
            out.append((at, _record("syscalls/sys_exit_futex", common_pid=tid)))
    out.sort(key=lambda item: item[0])
    return out


class _Kernel(KernelEvents):
    """The kernel instance, its events given, its processes the ones above."""

    def __init__(self, tracefs: object, layout: PageLayout, groups: tuple[str, ...]) -> None:
        super().__init__(_Formats(), layout, groups)  # type: ignore[arg-type]
        self.pending = _kernel_records()

    def start(self) -> None:
        self._learn_formats()

    def close(self) -> None:
        pass

    def _list(self, tids: Any) -> list[tuple[int, int, ProcessKey]]:
        new = {PROCESSES[tid] for tid in tids if tid in PROCESSES}
        for key in new:
            self.processes.add(key)
            self.stats.processes += 1
        return [(tid, 0, key) for tid, key in PROCESSES.items() if key in new]

    def _read_records(self) -> list[tuple[int, memoryview]]:
        records, self.pending = self.pending, []
        return records


class _Reader(_FakeReader):
    tracefs = None


def _record_with(count: str, monkeypatch: Any) -> tuple[Any, ...]:
    pages = _spread(_raws(), 2, 1, [0, 3, 1])
    reads = [pages[:70], pages[70:140], pages[140:]]  # the first busy: workers start
    pools: list[int] = []

    class Pool(decode_stage.WorkerPool):
        def __init__(self, workers: int, *args: Any, **kwargs: Any) -> None:
            pools.append(workers)
            super().__init__(workers, *args, **kwargs)

    args = cli.parser().parse_args(["record", "--duration", "60", "--no-resource-detection",
                                    "--kernel", "sched,syscalls", "--workers", count])  # fmt: skip
    reader = _Reader(reads, stop_when_read=True)
    monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
    monkeypatch.setattr(record_command, "TraceReader", lambda *a, **k: reader)
    monkeypatch.setattr(decode_stage, "WorkerPool", Pool)
    monkeypatch.setattr(kernel_events, "KernelEvents", _Kernel)
    out, err = io.StringIO(), io.StringIO()
    assert record_command.record(args, out, err) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    summary = re.sub(r"in [0-9.]+ s \([0-9.,]+/s\)", "", err.getvalue())
    return _items(lines, "spans"), summary, pools


def test_record_kernel_with_workers_writes_what_it_writes_in_process(monkeypatch):
    spans, summary, pools = _record_with("1", monkeypatch)
    assert pools == []
    assert sum(spans.values()) == SPANS
    assert f"kernel view of {SPANS} spans (0 partial" in summary, summary
    refused = len(range(5, SPANS, 15))  # thread 9's spans naming 8: n % 15 == 5
    assert f"{refused} spans naming a linux.thread.id not of their writer's" in summary, summary
    texts = "".join(spans)
    assert texts.count('"linux.sched.on_cpu_ns"') == SPANS
    with_workers = _record_with("2", monkeypatch)
    assert with_workers[2] == [2]  # the workers decoded all but the first read
    assert with_workers[:2] == (spans, summary)


def test_a_worker_for_the_kernel_view_sends_spans_checked_and_logs_encoded():
    """Spans checked, logs encoded; an EventHeader record whole (the join learns the
    resource named beside it, then the kernel view adds to its span), resources whole."""
    _, _, raws = _records()
    raws.append(eventheader_record(RUST_ID, "Span", rust_span()))
    pages = [raw for _cpu, raw in _spread(raws, 1, 1, [0])]
    decoder = RecordDecoder(["*"], PageLayout(), ["*"])
    worker_loop.add_formats(decoder, [text for _system, text in FORMATS + EH_FORMATS])
    kinds = {}
    for encode_spans in (True, False):
        records, _ = worker_loop.decode_chunk(decoder, RecordChecker(), pages, None, encode_spans)
        kinds[encode_spans] = Counter(type(r).__name__ for r in records)
    logs = len(make_logs())
    assert kinds[False]["CheckedSpan"] == kinds[True]["EncodedRecord"] - logs - 1 > 0
    assert kinds[False]["EncodedRecord"] == logs
    assert kinds[False]["TraceRecord"] == kinds[True]["TraceRecord"] + 1  # and the resource
