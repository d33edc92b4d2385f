# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A short command-line job, as a user would run one: it sets up the exporters, writes 6
spans and 7 logs at once, and exits. It prints, as one JSON line, the OTLP/JSON of what its
SDK handed to the exporters, so a test can compare it with what a reader rebuilt.

``python -m tests.support.short_app PREFIX SERVICE [--wait-listened [--settle S]] [--go FILE]``:
with ``--wait-listened`` it first waits (up to 60 s) until something listens to its span
tracepoint, as a long-running service would be found by a reader's rescan; ``--settle``
then waits S seconds more (perf opens its events, which sets the enable bit, before it
enables them: records written in between are not recorded); ``--go`` then waits (up to
180 s) until FILE exists (a test starts its tools, then says go).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json


def load_everything() -> None:
    """Import now what :func:`main` would import when first used (the OTLP encoder that
    its OTLP/JSON needs): for a caller about to lose the right to read the interpreter's
    files (tests/support/simulated_container.py)."""
    importlib.import_module("google.protobuf.json_format")
    for module in ("_log_encoder", "trace_encoder", "_internal.metrics_encoder"):
        importlib.import_module(f"opentelemetry.exporter.otlp.proto.common.{module}")


def main(
    prefix: str,
    service: str,
    wait_listened: bool,
    settle: float = 0.0,
    more_resource: dict[str, object] | None = None,
    go: str | None = None,
) -> dict[str, object]:
    """``more_resource``: more resource attributes (a process detector's ``process.pid``)."""
    resource = Resource(
        {"service.name": service, "service.version": "1.0", **(more_resource or {})}
    )
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    span_exporter = UserEventsSpanExporter(prefix=prefix)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer_provider.add_span_processor(UserEventsSpanProcessor(span_exporter))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    log_exporter = UserEventsLogExporter(prefix=prefix)
    logger_provider.add_log_record_processor(UserEventsLogRecordProcessor(log_exporter))
    if wait_listened:  # every tracepoint it writes to: a rescan may find them one by one
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            span_exporter.enabled and all(log_exporter.enabled_for(n) for n in (9, 13, 17))
        ):
            time.sleep(0.05)
        time.sleep(settle)
    if go is not None:
        deadline = time.monotonic() + 180
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.05)
    tracer = tracer_provider.get_tracer(f"{service}.job", "1.0")
    logger = logger_provider.get_logger(f"{service}.job")
    with tracer.start_as_current_span("job", attributes={"job.items": 5}):
        for number in range(5):
            with tracer.start_as_current_span(f"item {number}", attributes={"n": number}):
                logger.emit(severity_number=SeverityNumber.INFO, body=f"item {number} done")
        logger.emit(severity_number=SeverityNumber.WARN, body="one item was slow")
        logger.emit(severity_number=SeverityNumber.ERROR, body={"failed": 0, "ok": 5})
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return {
        "spans": otlp_json.spans_request(spans.get_finished_spans()),
        "logs": otlp_json.logs_request(logs.get_finished_logs()),
    }


if __name__ == "__main__":
    flags = sys.argv[3:]
    settle = float(flags[flags.index("--settle") + 1]) if "--settle" in flags else 0.0
    go = flags[flags.index("--go") + 1] if "--go" in flags else None
    result = main(sys.argv[1], sys.argv[2], "--wait-listened" in flags, settle, go=go)
    sys.stdout.write(json.dumps(result) + "\n")
