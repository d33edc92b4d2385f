# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The lean tracer while detached, beside the SDK's ALWAYS_OFF as the reference: every way
instrumentations start spans injects the caller's trace id, trace flags and trace state
downstream, the baggage ALWAYS_OFF would show, and leaves the context as it found it.

The one difference, on purpose and documented: the lean tracer makes no span id, so the
outgoing span id is the caller's (ALWAYS_OFF sends a fresh one) and the flags are the
caller's (ALWAYS_OFF clears the sampled flag). With no caller's trace the lean tracer sends
none (ALWAYS_OFF starts an unsampled one).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from wsgiref.util import setup_testing_defaults

import pytest
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from opentelemetry_exporter_userevents import UserEventsSampler
from opentelemetry_exporter_userevents._export import writer
from opentelemetry_exporter_userevents.lean_tracer import UserEventsTracerProvider

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SPAN_ID = "b7ad6b7169203331"
TRACE_STATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])

Pattern = Callable[[trace.Tracer, dict[str, str]], dict[str, str]]
"""Runs one way of starting spans with the caller's ``headers``; returns what ``inject``
wrote inside."""


def inject() -> dict[str, str]:
    carrier: dict[str, str] = {}
    PROPAGATOR.inject(carrier)
    return carrier


def extract(headers: dict[str, str]) -> otel_context.Context:
    return PROPAGATOR.extract(headers)


@pytest.fixture(autouse=True)
def fresh_warning(monkeypatch):
    monkeypatch.setattr(writer, "_warned_unavailable", False)


@pytest.fixture
def tracers(tmp_path):
    """(lean tracer, detached; the SDK's ALWAYS_OFF tracer), each with an in-memory exporter
    that must stay empty."""
    lean = UserEventsTracerProvider(sampler=UserEventsSampler(tracefs=str(tmp_path)))
    assert not lean.sampler.enabled
    reference = TracerProvider(sampler=ALWAYS_OFF)
    memories = []
    for provider in (lean, reference):
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        memories.append(memory)
    yield lean.get_tracer("t"), reference.get_tracer("t")
    assert all(memory.get_finished_spans() == () for memory in memories)


def headers(flags: str) -> dict[str, str]:
    return {
        "traceparent": f"00-{TRACE_ID}-{SPAN_ID}-{flags}",
        "tracestate": TRACE_STATE,
        "baggage": "user=alice,tenant=t1",
    }


def run(pattern: Pattern, tracer: trace.Tracer, caller: dict[str, str]) -> dict[str, str]:
    """``pattern`` with the context as found checked after it (the same Context object)."""
    before = otel_context.get_current()
    carrier = pattern(tracer, caller)
    assert otel_context.get_current() is before
    return carrier


def check(lean: dict[str, str], reference: dict[str, str], flags: str) -> None:
    """The caller's trace id and trace state, as ALWAYS_OFF sends them; the caller's span id
    and flags (ALWAYS_OFF: a fresh span id, flags 00); the baggage ALWAYS_OFF sends."""
    version, trace_id, span_id, sent_flags = lean["traceparent"].split("-")
    ref_version, ref_trace_id, ref_span_id, ref_flags = reference["traceparent"].split("-")
    assert (version, trace_id) == (ref_version, ref_trace_id) == ("00", TRACE_ID)
    assert lean.get("tracestate") == reference.get("tracestate") == TRACE_STATE
    assert lean.get("baggage") == reference.get("baggage")
    assert (span_id, sent_flags) == (SPAN_ID, flags)
    assert ref_span_id != SPAN_ID and not int(ref_flags, 16) & 1  # not sampled


# --- the patterns ---------------------------------------------------------------------


def as_current_with_context(tracer: trace.Tracer, caller: dict[str, str]) -> dict[str, str]:
    with tracer.start_as_current_span("consume", context=extract(caller), kind=SpanKind.CONSUMER):
        return inject()


def as_current_under_attached_context(
    tracer: trace.Tracer, caller: dict[str, str]
) -> dict[str, str]:
    token = otel_context.attach(extract(caller))
    try:
        with tracer.start_as_current_span("server", kind=SpanKind.SERVER):
            return inject()
    finally:
        otel_context.detach(token)


def nested_children(tracer: trace.Tracer, caller: dict[str, str]) -> dict[str, str]:
    with tracer.start_as_current_span("consume", context=extract(caller), kind=SpanKind.CONSUMER):
        with tracer.start_as_current_span("handle"):
            with tracer.start_as_current_span("send", kind=SpanKind.PRODUCER):
                carrier = inject()
            handle = inject()
        consume = inject()
    # each level sends the caller's trace (ALWAYS_OFF: each its own unsampled span id)
    for level in (handle, consume):
        assert level["traceparent"][:36] == carrier["traceparent"][:36]
        assert level["tracestate"] == carrier["tracestate"]
    return carrier


def start_span_then_use_span(tracer: trace.Tracer, caller: dict[str, str]) -> dict[str, str]:
    span = tracer.start_span("consume", context=extract(caller), kind=SpanKind.CONSUMER)
    with trace.use_span(span, end_on_exit=True):
        return inject()


def start_span_under_attached_context(
    tracer: trace.Tracer, caller: dict[str, str]
) -> dict[str, str]:
    token = otel_context.attach(extract(caller))
    try:
        span = tracer.start_span("server", kind=SpanKind.SERVER)
        with trace.use_span(span, end_on_exit=True):
            return inject()
    finally:
        otel_context.detach(token)


def asyncio_task(tracer: trace.Tracer, caller: dict[str, str]) -> dict[str, str]:
    async def child() -> dict[str, str]:
        with tracer.start_as_current_span("task"):
            await asyncio.sleep(0)
            return inject()

    async def main() -> dict[str, str]:
        with tracer.start_as_current_span("consume", context=extract(caller)):
            return await asyncio.create_task(child())  # the task copies the context

    return asyncio.run(main())


def thread_with_copied_context(tracer: trace.Tracer, caller: dict[str, str]) -> dict[str, str]:
    found: list[dict[str, str]] = []

    def work() -> None:
        with tracer.start_as_current_span("worker"):
            found.append(inject())

    with tracer.start_as_current_span("consume", context=extract(caller)):
        copied = contextvars.copy_context()
        thread = threading.Thread(target=copied.run, args=(work,))
        thread.start()
        thread.join()
    return found[0]


def executor_with_copied_context(tracer: trace.Tracer, caller: dict[str, str]) -> dict[str, str]:
    with tracer.start_as_current_span("consume", context=extract(caller)):
        copied = contextvars.copy_context()
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(copied.run, inject).result()


def baggage_of_the_current_context(tracer: trace.Tracer, caller: dict[str, str]) -> dict[str, str]:
    """The SDK sets the span in the *current* context: the baggage inside is the current
    context's, not that of ``context=``."""
    token = otel_context.attach(baggage.set_baggage("local", "yes"))
    try:
        with tracer.start_as_current_span("consume", context=extract(caller)):
            return inject()
    finally:
        otel_context.detach(token)


PATTERNS = [
    as_current_with_context,
    as_current_under_attached_context,
    nested_children,
    start_span_then_use_span,
    start_span_under_attached_context,
    asyncio_task,
    thread_with_copied_context,
    executor_with_copied_context,
    baggage_of_the_current_context,
]


@pytest.mark.parametrize("flags", ["01", "00"])
@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.__name__)
def test_detached_propagation_is_the_callers_as_always_off_sends_it(tracers, pattern, flags):
    lean, reference = tracers
    caller = headers(flags)
    check(run(pattern, lean, caller), run(pattern, reference, caller), flags)


def test_baggage_inside_is_the_current_contexts_as_with_always_off(tracers):
    lean, reference = tracers
    carriers = [run(baggage_of_the_current_context, t, headers("01")) for t in tracers]
    assert carriers[0]["baggage"] == carriers[1]["baggage"] == "local=yes"
    # the baggage of ``context=`` is not shown inside, by the SDK either
    carriers = [run(as_current_with_context, t, headers("01")) for t in (lean, reference)]
    assert "baggage" not in carriers[0] and "baggage" not in carriers[1]


def test_no_caller_trace_means_nothing_injected_not_the_current_span(tracers):
    """``context=`` without a span (no traceparent came) while another span is current:
    neither the lean tracer nor ALWAYS_OFF sends the current span's trace; ALWAYS_OFF starts
    an unsampled trace of its own, the lean tracer sends none."""
    lean, reference = tracers
    found = {}
    for name, tracer in (("lean", lean), ("reference", reference)):
        token = otel_context.attach(extract(headers("01")))
        try:
            found[name] = run(as_current_with_context, tracer, {"baggage": "k=v"})
        finally:
            otel_context.detach(token)
    assert found["lean"] == {"baggage": "user=alice,tenant=t1"}  # the current context's
    ref_trace_id, ref_flags = found["reference"]["traceparent"].split("-")[1::2]
    # not sampled (SDK 1.4x sets the W3C random-trace-id flag 02 on a trace id it makes)
    assert ref_trace_id != TRACE_ID and not int(ref_flags, 16) & 1
    assert found["reference"]["baggage"] == "user=alice,tenant=t1"


def test_the_context_is_restored_when_the_block_raises(tracers):
    lean, _ = tracers
    before = otel_context.get_current()
    with pytest.raises(KeyError):
        with lean.start_as_current_span("consume", context=extract(headers("01"))):
            raise KeyError("x")
    assert otel_context.get_current() is before


@pytest.mark.parametrize("context", [42, "ctx", object(), {"not": "a context"}])
def test_a_foreign_context_is_no_parent_and_raises_nothing(tracers, context):
    lean, _ = tracers
    span = lean.start_span("s", context=context)
    assert not span.get_span_context().is_valid
    with lean.start_as_current_span("s", context=context) as span:
        assert "traceparent" not in inject()


def test_through_the_wsgi_instrumentation(tracers):
    """opentelemetry-instrumentation-wsgi extracts the caller's headers and passes them as
    ``context=`` to ``start_span``, then ``use_span``: what the application injects for its
    own outgoing call is the caller's trace, as with ALWAYS_OFF."""
    wsgi = pytest.importorskip("opentelemetry.instrumentation.wsgi")

    def outgoing(tracer_provider: object) -> dict[str, str]:
        injected: list[dict[str, str]] = []

        def app(environ, start_response):
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            injected.append(carrier)
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]

        middleware = wsgi.OpenTelemetryMiddleware(app, tracer_provider=tracer_provider)
        environ: dict[str, object] = {
            "HTTP_TRACEPARENT": f"00-{TRACE_ID}-{SPAN_ID}-01",
            "HTTP_TRACESTATE": TRACE_STATE,
            "HTTP_BAGGAGE": "user=alice",
            "wsgi.input": BytesIO(b""),
        }
        setup_testing_defaults(environ)
        before = otel_context.get_current()
        body = b"".join(middleware(environ, lambda status, headers, exc_info=None: None))
        assert body == b"ok"
        assert otel_context.get_current() is before
        return injected[0]

    lean, reference = tracers
    lean_provider = _ProviderOf(lean)
    reference_provider = _ProviderOf(reference)
    check(outgoing(lean_provider), outgoing(reference_provider), "01")


class _ProviderOf(trace.TracerProvider):
    """A provider that hands out one tracer (the instrumentation asks for its own)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def get_tracer(self, *args: object, **kwargs: object) -> trace.Tracer:
        return self.tracer
