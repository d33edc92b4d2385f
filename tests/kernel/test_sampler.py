# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsSampler on a real kernel: nothing is recorded while detached, and full spans
flow from the first span started after a listener attaches."""

import hashlib

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opentelemetry_exporter_userevents import (
    UserEventsSampler,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)

pytestmark = pytest.mark.kernel

ATTRIBUTES = {"http.request.method": "GET", "http.response.status_code": 200,
              "url.path": "/cart/4", "retry": False}  # fmt: skip


def request(tracer, name):
    with tracer.start_as_current_span(name, attributes=ATTRIBUTES) as span:
        span.add_event("cart loaded", {"items": 4})
        return span.is_recording()


def test_sampler_drops_while_detached_and_records_from_the_first_span_after(
    event_name, tracefs, attach
):
    prefix = "s" + hashlib.blake2b(event_name.encode(), digest_size=6).hexdigest()
    sampler = UserEventsSampler(prefix=prefix)
    exporter = UserEventsSpanExporter(prefix=prefix)
    memory = InMemorySpanExporter()  # another exporter on the same provider
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("checkout")
    try:
        detached = [request(tracer, "detached") for _ in range(3)]
        seen_detached = len(memory.get_finished_spans())
        attach(exporter.registration)
        attached = [request(tracer, f"attached-{i}") for i in range(2)]
        lines = attach.lines(exporter.registration)
        for system, name in attach.attached:  # the listener goes away
            tracefs.set_enabled(system, name, False, attach.instance)
        after = request(tracer, "detached-again")
    finally:
        provider.shutdown()
        sampler.close()

    assert sampler.registration.tracepoint == exporter.registration.tracepoint
    assert detached == [False] * 3 and seen_detached == 0
    assert attached == [True, True] and after is False
    assert [span.name for span in memory.get_finished_spans()] == ["attached-0", "attached-1"]
    assert len(lines) == 2 and "name=attached-0 " in lines[0]
    assert '"url.path":"/cart/4"' in lines[0] and '"name":"cart loaded"' in lines[0]
    assert "trace_flags=(1)" in lines[0] or "trace_flags=(3)" in lines[0]


def test_lean_provider_starts_nothing_while_detached_and_records_in_full_after(
    event_name, tracefs, attach
):
    from opentelemetry.trace import INVALID_SPAN  # noqa: PLC0415

    from opentelemetry_exporter_userevents.lean_tracer import (  # noqa: PLC0415
        UserEventsTracerProvider,
    )

    prefix = "l" + hashlib.blake2b(event_name.encode(), digest_size=6).hexdigest()
    sampler = UserEventsSampler(prefix=prefix)
    exporter = UserEventsSpanExporter(prefix=prefix)
    memory = InMemorySpanExporter()
    provider = UserEventsTracerProvider(sampler=sampler)
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("checkout")
    try:
        with tracer.start_as_current_span("detached") as span:
            detached_span = span
        seen_detached = len(memory.get_finished_spans())
        attach(exporter.registration)
        attached = [request(tracer, f"attached-{i}") for i in range(2)]
        lines = attach.lines(exporter.registration)
    finally:
        provider.shutdown()
        sampler.close()

    assert detached_span is INVALID_SPAN and seen_detached == 0
    assert attached == [True, True]
    assert [span.name for span in memory.get_finished_spans()] == ["attached-0", "attached-1"]
    assert len(lines) == 2 and "name=attached-0 " in lines[0]
    assert '"url.path":"/cart/4"' in lines[0] and '"name":"cart loaded"' in lines[0]
    assert '"items":4' in lines[0]
