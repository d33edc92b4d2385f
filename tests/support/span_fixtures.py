# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Spans and log records with every field and every kind of value, made by the real SDK."""

from __future__ import annotations

import logging

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

RESOURCE = Resource({"service.name": "checkout", "host.name": "h1", "pid": 4242},
                    schema_url="https://opentelemetry.io/schemas/1.21.0")  # fmt: skip
VALUES = {
    "str": "GET /users/{id}",
    "int": 200,
    "float": 0.25,
    "bool": True,
    "bytes": b"\x00\x01\xff",
    "nan": float("nan"),
    "inf": float("-inf"),
    "big": 2**100,
    "nul": "a\x00b",
    "surrogate": "\ud800x",
    "none": None,
    "list": (1, "two", 3.0, None),
    "map": {"nested": {"deep": [1, {"k": b"v"}]}},
    "~tilde": "key starting with ~",
}


def make_spans(processor=None, resource=RESOURCE):
    """A remote-parented server span with events and links, and a child with an error."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if processor is not None:
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("lib.http", "1.2.3", schema_url="https://x/s", attributes={"a": 1})
    remote = SpanContext(
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(1),
        trace_state=TraceState([("vendor", "v1")]),
    )
    linked = SpanContext(0x1234, 0x5678, is_remote=False, trace_flags=TraceFlags(0))
    context = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    with tracer.start_as_current_span(
        "GET /users/{id}", context=context, kind=SpanKind.SERVER, attributes=VALUES,
        links=[Link(linked, {"link.attr": "x"})],
    ) as server:  # fmt: skip
        server.add_event("cache miss", {"key": "user:1", "bytes": b"\x00"})
        with tracer.start_as_current_span("SELECT users", kind=SpanKind.CLIENT) as child:
            child.set_status(Status(StatusCode.ERROR, "connection reset"))
            child.record_exception(ValueError("boom"))
    provider.shutdown()
    return memory.get_finished_spans()


def make_logs(processor=None, resource=RESOURCE):
    """A log record at each severity, with bodies of every kind, inside a span."""
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=resource)
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    if processor is not None:
        provider.add_log_record_processor(processor)
    logger = provider.get_logger("lib.log", "0.1", attributes={"scope.attr": True})
    tracer = TracerProvider(resource=resource).get_tracer("t")
    bodies = ["plain text", 42, 1.5, True, b"\x00raw", ["a", 1], {"k": {"n": None}}, None,
              "nul\x00inside", float("nan"), 2**70, "\ud83d\ude00"]  # fmt: skip
    with tracer.start_as_current_span("work"):
        for number in range(1, 25):
            logger.emit(
                severity_number=SeverityNumber(number),
                severity_text=logging.getLevelName(10 + number) if number % 2 else None,
                body=bodies[number % len(bodies)],
                attributes={"n": number, "values": VALUES["list"]},
                event_name="my.event" if number % 3 == 0 else None,
            )
        logger.emit(body="no severity, no timestamp")
    provider.shutdown()
    return memory.get_finished_logs()
