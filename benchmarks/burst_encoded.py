# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A writer faster than the SDK, for bursts bigger than an emulated guest's SDK can write
in minutes: ``python benchmarks/burst_encoded.py PREFIX COUNT [START [CPU]]`` (CPU: run
pinned there).

It registers the span exporter's tracepoints (``UserEventsSpanExporter``), waits until a
reader listens, encodes one span of the benchmark's shape (4 attributes, 1 event) with the
exporter's own encoder, then writes ``COUNT`` copies of that record, each with its own
trace and span id (hex text patched in place: ``START + n``), with one ``writev`` each,
as the exporter does. The resource record goes through the exporter's own resource
check every 1,000 records, so it is repeated on the exporter's interval as in a service.
It prints what it wrote as one JSON line: the spans, the seconds, the exporter's counts.
Only ids differ from one record to the next: attributes, event and times are those of
the one span encoded.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from benchmarks.reader_capture import benchmark_span  # noqa: E402
from opentelemetry_exporter_userevents import UserEventsSpanExporter  # noqa: E402
from opentelemetry_exporter_userevents._export.span_encoder import encode_span  # noqa: E402
from opentelemetry_exporter_userevents.abi.errors import UserEventsError  # noqa: E402
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD  # noqa: E402

RESOURCE_EVERY = 1000
"""Records between two looks at whether the resource record is due."""


def one_span(prefix: str) -> ReadableSpan:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": f"burst-{prefix}"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    benchmark_span(provider.get_tracer("burst", "1.0"), 7)
    return memory.get_finished_spans()[0]


def write(prefix: str, count: int, start: int, wait: float = 120) -> dict[str, object]:
    exporter = UserEventsSpanExporter(prefix=prefix)
    registration = exporter.registration
    assert registration is not None, "the span tracepoint is registered"
    deadline = time.monotonic() + wait
    while not registration.enabled and time.monotonic() < deadline:
        time.sleep(0.01)
    span = one_span(prefix)
    resources = exporter._resources  # the exporter's own resource check  # noqa: SLF001
    resource_id = resources.announce(span.resource)
    payload, _ = encode_span(span, resource_id, FTRACE_MAX_PAYLOAD)
    record = bytearray(payload)
    context = span.context
    trace_at = record.find(b"%032x" % context.trace_id)
    span_at = record.find(b"%016x" % context.span_id)
    assert trace_at >= 0 and span_at >= 0, "ids are hex text in the record"
    written = failed = 0
    began = time.monotonic()
    for number in range(start, start + count):
        if number % RESOURCE_EVERY == 0:
            resources.announce(span.resource)
        record[trace_at : trace_at + 32] = b"%032x" % (number + 1)
        record[span_at : span_at + 16] = b"%016x" % (number + 1)
        try:
            registration.write(record)
            written += 1
        except UserEventsError as error:  # EBADF: the reader went away
            if error.errno != errno.EBADF:
                raise
            failed += 1
    elapsed = time.monotonic() - began
    stats = exporter.stats.snapshot()
    exporter.shutdown()
    return {"spans": written, "failed": failed, "elapsed": elapsed, "stats": stats}


if __name__ == "__main__":
    arguments = sys.argv[1:]
    first = int(arguments[2]) if len(arguments) > 2 else 0
    if len(arguments) > 3:
        os.sched_setaffinity(0, {int(arguments[3])})
    print(json.dumps(write(arguments[0], int(arguments[1]), first)))
