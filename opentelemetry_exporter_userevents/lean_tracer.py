# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A tracer provider that costs next to nothing while nobody listens (opt-in).

The SDK's ALWAYS_OFF (and :class:`UserEventsSampler` while detached) still generates a
trace id, runs the sampler, builds a context and a ``NonRecordingSpan`` for every span.
:class:`UserEventsTracerProvider` wraps the SDK provider; its tracers read the span
tracepoint's enable word first, and while it is 0 they generate nothing:

- ``start_span`` returns the parent span's context (as a ``NonRecordingSpan``) if the
  context holds a valid one, else ``INVALID_SPAN``;
- ``start_as_current_span`` yields that span without attaching a new context.

From the first span started after a listener attaches, they delegate to the SDK tracer,
so spans are recorded in full. What differs from ALWAYS_OFF while detached:

- no new span ids: a remote parent's context reaches children and outgoing
  ``traceparent`` headers unchanged, so downstream services see the *caller's* span id
  as their parent (ALWAYS_OFF would send a fresh, unsampled span id);
- the trace flags and trace state are the parent's, unchanged (ALWAYS_OFF clears the
  sampled flag); with no parent there is no trace at all (all-zero ids, nothing injected);
- the sampler is not called and span processors' ``on_start``/``on_end`` are not called.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import (
    INVALID_SPAN,
    Link,
    NonRecordingSpan,
    Span,
    SpanKind,
    get_current_span,
)
from opentelemetry.util.types import Attributes

from opentelemetry_exporter_userevents.sampler import UserEventsSampler

__all__ = ["UserEventsTracer", "UserEventsTracerProvider"]


def _detached_span(context: Context | None) -> Span:
    parent = get_current_span(context)
    if parent is INVALID_SPAN:
        return parent
    span_context = parent.get_span_context()
    if not span_context.is_valid:
        return INVALID_SPAN
    # A recording parent must not be ended by our caller's ``end()``: wrap its context.
    return NonRecordingSpan(span_context) if parent.is_recording() else parent


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
            # The current context already holds the parent; nothing new to attach.
            yield _detached_span(context)
            return
        with self._tracer.start_as_current_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
            end_on_exit,
        ) as span:
            yield span


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
