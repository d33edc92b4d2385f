# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsTracerProvider without a kernel: while detached no span (and no id) is made and
a remote parent's context reaches children and outgoing headers through the real W3C
propagator; once listened, spans are recorded in full by the SDK."""

import os
import subprocess
import sys

import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import INVALID_SPAN, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from opentelemetry_exporter_userevents import UserEventsSampler
from opentelemetry_exporter_userevents._export import writer
from opentelemetry_exporter_userevents.lean_tracer import UserEventsTracerProvider

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture(autouse=True)
def fresh_warning(monkeypatch):
    monkeypatch.setattr(writer, "_warned_unavailable", False)


@pytest.fixture
def setup(tmp_path):
    sampler = UserEventsSampler(tracefs=str(tmp_path))
    provider = UserEventsTracerProvider(sampler=sampler)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, sampler, memory


def listen(sampler):
    sampler._word = memoryview(bytearray(b"\1\0\0\0")).cast("I")


def test_detached_without_parent_makes_no_span(setup):
    provider, _, memory = setup
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("a", attributes={"k": 1}) as span:
        span.add_event("e")
        assert span is INVALID_SPAN
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        assert carrier == {}
    assert memory.get_finished_spans() == ()


def test_detached_remote_parent_reaches_children_and_headers(setup):
    provider, _, memory = setup
    tracer = provider.get_tracer("t")
    propagator = TraceContextTextMapPropagator()
    ctx = propagator.extract({"traceparent": PARENT})
    token = otel_context.attach(ctx)
    try:
        with tracer.start_as_current_span("server") as server:
            assert server.get_span_context().span_id == 0xB7AD6B7169203331
            child = tracer.start_span("child")
            assert child.get_span_context().trace_id == 0x0AF7651916CD43DD8448EB211C80319C
            assert child.get_span_context().span_id == 0xB7AD6B7169203331
            child.end()
            out: dict[str, str] = {}
            propagator.inject(out)
            assert out["traceparent"] == PARENT
        explicit = tracer.start_span("x", context=ctx)
        assert explicit.get_span_context().span_id == 0xB7AD6B7169203331
    finally:
        otel_context.detach(token)
    assert memory.get_finished_spans() == ()


def test_detached_child_of_recording_parent_does_not_end_it(setup):
    provider, sampler, memory = setup
    tracer = provider.get_tracer("t")
    listen(sampler)
    parent = tracer.start_span("parent")
    sampler._word = memoryview(bytearray(4)).cast("I")
    with tracer.start_as_current_span("c", context=set_span_in_context(parent)) as child:
        assert child.get_span_context() == parent.get_span_context()
    assert parent.is_recording()
    parent.end()
    assert [s.name for s in memory.get_finished_spans()] == ["parent"]


def test_listened_spans_are_recorded_in_full_with_the_remote_parent(setup):
    provider, sampler, memory = setup
    tracer = provider.get_tracer("t", "1.0")
    listen(sampler)
    ctx = TraceContextTextMapPropagator().extract({"traceparent": PARENT})
    with tracer.start_as_current_span("s", context=ctx, attributes={"a": 1}) as span:
        span.add_event("ev", {"x": 2})
        out: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(out)
    (finished,) = memory.get_finished_spans()
    assert finished.parent.span_id == 0xB7AD6B7169203331
    assert finished.context.span_id != 0xB7AD6B7169203331
    assert finished.attributes == {"a": 1}
    assert finished.events[0].name == "ev"
    assert finished.instrumentation_scope.version == "1.0"
    assert out["traceparent"].split("-")[2] == f"{finished.context.span_id:016x}"


def test_wrapping_requires_the_user_events_sampler():
    with pytest.raises(TypeError):
        UserEventsTracerProvider(TracerProvider())


SHOW_PROVIDER = """
from opentelemetry import trace
from opentelemetry_exporter_userevents.configurator import UserEventsConfigurator
UserEventsConfigurator().configure()
provider = trace.get_tracer_provider()
span = provider.get_tracer("t").start_span("s")
print(type(provider).__name__, provider.sampler.get_description(), span is trace.INVALID_SPAN)
"""


def test_configurator_installs_it_with_the_user_events_sampler(tmp_path):
    env = dict(
        os.environ,
        OTEL_EXPORTER_USER_EVENTS_TRACEFS=str(tmp_path),
        OTEL_TRACES_SAMPLER="user_events",
        OTEL_TRACES_EXPORTER="none",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
    )
    out = subprocess.run(
        [sys.executable, "-c", SHOW_PROVIDER], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert (out[0], out[2]) == ("UserEventsTracerProvider", "True")
    assert out[1].startswith("UserEventsSampler{ParentBased")
