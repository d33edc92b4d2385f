# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A busy service, for the live burst test and benchmark: it writes spans of the
benchmark's shape (4 attributes, 1 event) through the exporter, as fast as it can or paced
at a rate, and prints what it wrote as one JSON line.

``python -m tests.support.burst_writer PREFIX COUNT RATE [--own]``: ``COUNT`` spans,
``RATE`` per second (0: as fast as it can). It does not wait to be listened to: a
reader started first holds its tracepoints, and a span it writes unheard is counted
``not_listened`` (the burst test requires every span written). ``--own``
adds the OTLP/JSON of what its SDK handed the exporter (for exactness checks; it costs
memory, so the benchmark leaves it out).
"""

from __future__ import annotations

import json
import sys
import time

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opentelemetry_exporter_userevents import UserEventsSpanExporter, UserEventsSpanProcessor
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json


def main(prefix: str, count: int, rate: float, own: bool) -> dict[str, object]:
    exporter = UserEventsSpanExporter(prefix=prefix)
    provider = TracerProvider(resource=Resource({"service.name": f"burst-{prefix}"}))
    mine = InMemorySpanExporter()
    if own:
        provider.add_span_processor(SimpleSpanProcessor(mine))
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    tracer = provider.get_tracer("burst", "1.0")
    start = time.monotonic()
    for number in range(count):
        if rate > 0:
            ahead = start + number / rate - time.monotonic()
            if ahead > 0.001:
                time.sleep(ahead)
        with tracer.start_as_current_span(
            "GET /cart/{id}",
            attributes={"http.request.method": "GET", "url.path": f"/cart/{number}",
                        "http.response.status_code": 200, "user.id": number},
        ) as span:  # fmt: skip
            span.add_event("cart loaded", {"items": number % 5})
    elapsed = time.monotonic() - start
    provider.shutdown()
    stats = exporter.stats.snapshot()
    result: dict[str, object] = {
        "spans": count,
        "elapsed": elapsed,
        "rate": count / elapsed if elapsed > 0 else 0.0,
        "stats": stats,
    }
    if own:
        result["own"] = otlp_json.spans_request(mine.get_finished_spans())
    return result


if __name__ == "__main__":
    arguments = sys.argv[1:]
    print(json.dumps(main(arguments[0], int(arguments[1]), float(arguments[2]),
                          "--own" in arguments)))  # fmt: skip
