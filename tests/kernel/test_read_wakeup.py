# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record`` idles its read interval while its buffers fill slowly and reads when the
kernel says a CPU's buffer is ``buffer_percent`` full: :meth:`.TraceReader.wait` polls the
instance's ``trace_pipe_raw`` files for that watermark (``WAKE_PERCENT``), on both kernel
ABIs."""

from __future__ import annotations

import os

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from opentelemetry_exporter_userevents import UserEventsSpanExporter, UserEventsSpanProcessor
from opentelemetry_exporter_userevents.abi.ring_buffer import parse_page
from opentelemetry_exporter_userevents.reader import TraceReader
from opentelemetry_exporter_userevents.reader.live.read_wakeup import WAKE_PERCENT
from tests.support.kernel_support import in_child

pytestmark = pytest.mark.kernel

BUFFER_KB = 64
"""The instance's buffer per CPU: 16 pages."""
FILL_PERCENT = 75
"""How full the test fills the buffer: past ``WAKE_PERCENT``, with room for the bytes the
page headers and the ends of pages take."""
EVENT_HEADER = 8
"""The ring buffer's header before each record (its type and length, and the length
word of a record too long for the type field)."""
SPAN_BYTES = 100
"""Each span's name (the record is larger)."""


def _write_on_cpu_0(prefix: str, count: int) -> dict:
    """``count`` spans from CPU 0 (so into one CPU's buffer)."""
    os.sched_setaffinity(0, {0})
    provider = TracerProvider(resource=Resource({"service.name": "wakeup"}))
    exporter = UserEventsSpanExporter(prefix=prefix, resource_interval_millis=3_600_000)
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    tracer = provider.get_tracer("wakeup")
    for number in range(count):
        with tracer.start_as_current_span(f"{number:0{SPAN_BYTES}d}"):
            pass
    return exporter.stats.snapshot()


def _bytes(reader: TraceReader) -> int:
    """The bytes of the records in the buffers now (read, so taken), headers included."""
    events = [e for _cpu, page in reader.read_cpu_pages()
              for e in parse_page(page, reader.decoder.layout).events]  # fmt: skip
    return sum(len(record) + EVENT_HEADER for _ts, record in events)


def _spans(records) -> int:
    return sum(1 for record in records if record.kind == "span")


def test_a_wait_ends_when_a_buffer_reaches_its_watermark_and_not_before(tracefs, prefix):
    reader = TraceReader(tracefs, prefix, buffer_size_kb=BUFFER_KB, rescan_interval=3600)
    with reader:
        reader.scan()
        assert tracefs.buffer_percent(reader.instance) == WAKE_PERCENT
        in_child(lambda: _write_on_cpu_0(prefix, 1))  # far below the watermark
        assert reader.wait(1.0) is False, "woken with one span in the buffer"
        one = _bytes(reader)  # its resource and the span
        in_child(lambda: _write_on_cpu_0(prefix, 2))
        span = _bytes(reader) - one
        resource = one - span
        assert 0 < span < 1024 and 0 < resource < 4096, (one, span)

        count = (BUFFER_KB * 1024 * FILL_PERCENT // 100 - resource) // span
        written = in_child(lambda: _write_on_cpu_0(prefix, count))["written"]
        assert reader.wait(30.0) is True, "not woken with the buffer past its watermark"
        records = reader.read()
    assert written == count + 1 and _spans(records) == count and reader.lost == 0
