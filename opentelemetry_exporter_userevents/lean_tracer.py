# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A tracer provider that costs next to nothing while nobody listens (opt-in).

The SDK's ALWAYS_OFF (and :class:`UserEventsSampler` while detached) still generates a
trace id, runs the sampler, builds a context and a ``NonRecordingSpan`` for every span.
:class:`UserEventsTracerProvider` wraps the SDK provider; its tracers read the span
tracepoint's enable word first, and while it is 0 they generate nothing:

- ``start_span`` returns the parent span's context (as a ``NonRecordingSpan``) if the
  context (``context=``, else the current one) holds a valid one, else ``INVALID_SPAN``;
- ``start_as_current_span`` makes that span current for the block, as the SDK does (the
  current context with that span set: its baggage stays what the SDK would show), and
  restores the context as it found it on exit.

So a caller's trace goes through a detached service: ``inject`` inside the block, in a
nested child, in ``use_span`` of a started span, in asyncio tasks and threads that copy
the context, sends the caller's trace id, trace flags and trace state, as ALWAYS_OFF does.
From the first span started after a listener attaches, the tracers delegate to the SDK
tracer, so spans are recorded in full. What differs from ALWAYS_OFF while detached:

- no new span ids: downstream services see the *caller's* span id as their parent
  (ALWAYS_OFF sends a fresh, unrecorded span id, so a listened neighbour's span would
  point to a span that no one recorded);
- the trace flags are the caller's, unchanged (ALWAYS_OFF clears the sampled flag, so a
  downstream ``ParentBased`` sampler would drop the rest of a sampled trace);
- with no valid parent there is no trace at all: all-zero ids, nothing injected
  (ALWAYS_OFF starts a new unsampled trace and injects it with flags 00);
- the sampler is not called and span processors' ``on_start``/``on_end`` are not called.

Never raises, whatever it is given: a ``context`` that is not one counts as no parent, and
a span the SDK tracer fails to start is no span (logged once per kind of error).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context, attach, detach
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import (
    INVALID_SPAN,
    Link,
    NonRecordingSpan,
    Span,
    SpanKind,
    get_current_span,
    set_span_in_context,
    use_span,
)
from opentelemetry.util.types import Attributes

from opentelemetry_exporter_userevents.sampler import UserEventsSampler

__all__ = ["UserEventsTracer", "UserEventsTracerProvider"]


def _detached_span(context: Context | None) -> Span:
    try:
        parent = get_current_span(context)
        if parent is INVALID_SPAN:
            return parent
        span_context = parent.get_span_context()
        if not span_context.is_valid:
            return INVALID_SPAN
        # A recording parent must not be ended by our caller's ``end()``: wrap its context.
        return NonRecordingSpan(span_context) if parent.is_recording() else parent
    except Exception:  # noqa: BLE001 - not a Context, or not a Span in it: no parent
        return INVALID_SPAN


class UserEventsTracer(trace.Tracer):
    """Delegates to the SDK tracer while the span tracepoint is listened; else starts nothing."""

    def __init__(self, tracer: trace.Tracer, sampler: UserEventsSampler) -> None:
        self._tracer = tracer
        self._sampler = sampler

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        if not self._sampler._word[0]:
            return _detached_span(context)
        try:
            return self._tracer.start_span(
                name,
                context,
                kind,
                attributes,
                links,
                start_time,
                record_exception,
                set_status_on_exception,
            )
        except Exception as exc:  # noqa: BLE001 - never into the application: no span
            self._sampler._writer.report(
                ("start_span", type(exc)),
                "user_events tracer: no span started, the SDK raised %s: %.200s",
                type(exc).__name__,
                exc,
            )
            return _detached_span(context)

    @contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        if not self._sampler._word[0]:
            # As the SDK's use_span: the span is set in the *current* context (so baggage is
            # what the SDK would show), attached for the block and detached after it.
            span = _detached_span(context)
            token = attach(set_span_in_context(span))
            try:
                yield span
            finally:
                detach(token)
            return
        # The SDK's start_as_current_span, with our start_span (which never raises).
        span = self.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        with use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class UserEventsTracerProvider(trace.TracerProvider):
    """Wraps an SDK ``TracerProvider`` whose sampler is a :class:`UserEventsSampler`.

    With no arguments, builds ``TracerProvider(sampler=UserEventsSampler(), **kwargs)``.
    Everything but ``get_tracer`` (processors, shutdown, resource) is the SDK provider's.
    """

    def __init__(
        self,
        provider: TracerProvider | None = None,
        *,
        sampler: UserEventsSampler | None = None,
        **kwargs: Any,
    ) -> None:
        if provider is None:
            sampler = sampler if sampler is not None else UserEventsSampler()
            provider = TracerProvider(sampler=sampler, **kwargs)
        elif sampler is None:
            found = provider.sampler
            if not isinstance(found, UserEventsSampler):
                raise TypeError("the provider's sampler must be a UserEventsSampler")
            sampler = found
        self.provider = provider
        self.sampler = sampler

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes = None,
    ) -> trace.Tracer:
        tracer = self.provider.get_tracer(
            instrumenting_module_name, instrumenting_library_version, schema_url, attributes
        )
        return UserEventsTracer(tracer, self.sampler)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.provider, name)
