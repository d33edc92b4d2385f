# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A service writing at a steady rate, for the collector load benchmark:
``python benchmarks/paced_writer.py PREFIX SERVICE RATE SECONDS``.

Through the SDK and our processors, as an instrumented service writes: RATE times a second,
one span and one log record whose body names it (``SERVICE log N``), for SECONDS. The span
and log keys let the benchmark count each record delivered, and delivered twice. It waits
(up to 60 s) to be listened to first, as a service started after the reader is, then
prints its exporters' counts as one JSON line: ``written`` records are the ones the kernel
took; ``not_listened`` the ones written while no reader held the tracepoints (a reader
killed and not yet back).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry._logs import SeverityNumber  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

from opentelemetry_exporter_userevents import (  # noqa: E402
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)


def write(prefix: str, service: str, rate: float, seconds: float) -> dict[str, object]:
    resource = Resource({"service.name": service})
    spans = UserEventsSpanExporter(prefix=prefix)
    logs = UserEventsLogExporter(prefix=prefix)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(UserEventsSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(UserEventsLogRecordProcessor(logs))
    deadline = time.monotonic() + 60
    while not (spans.enabled and logs.enabled_for(9)) and time.monotonic() < deadline:
        time.sleep(0.05)
    tracer = tracer_provider.get_tracer("load", "1.0")
    logger = logger_provider.get_logger("load")
    began = time.monotonic()
    number = 0
    while time.monotonic() - began < seconds:
        with tracer.start_as_current_span(f"request {number}", attributes={"n": number}):
            logger.emit(severity_number=SeverityNumber.INFO, body=f"{service} log {number}")
        number += 1
        pause = began + number / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    counts = {"spans": spans.stats.snapshot(), "logs": logs.stats.snapshot()}
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return {"service": service, "each": number, "elapsed": time.monotonic() - began, **counts}


if __name__ == "__main__":
    prefix, service, rate, seconds = sys.argv[1:5]
    print(json.dumps(write(prefix, service, float(rate), float(seconds))))
