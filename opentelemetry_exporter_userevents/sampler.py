# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A sampler that drops spans while nobody listens to the span tracepoint (opt-in).

The enable-bit-first processors make an unheard span cheap to *end*, but the SDK has
already recorded it: a ``_Span`` with its attributes, events, lock and timestamps. This
sampler moves the check to the start. While no tracer is attached to
``<prefix>_span``, it returns DROP, so the SDK creates a non-recording span and every
``set_attribute`` and ``add_event`` on it does nothing. Once a listener attaches, it asks
its parent sampler, and spans are recorded in full from the next span started.

The trade-off: the decision is the provider's, not the exporter's. While detached, *no*
exporter on the same provider sees spans, and the span context is unsampled, so it is
propagated unsampled (``traceparent`` flag 00) to the services this one calls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind, get_current_span
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from opentelemetry_exporter_userevents._export.config import EVENTHEADER, ExporterConfig
from opentelemetry_exporter_userevents._export.tracepoint_sets import span_tracepoints
from opentelemetry_exporter_userevents._export.writer import EventWriter
from opentelemetry_exporter_userevents.abi.user_events import enable_word

__all__ = ["UserEventsSampler", "sampler_factory"]

_logger = logging.getLogger(__name__)

_DROP = SamplingResult(Decision.DROP)


class UserEventsSampler(Sampler):
    """Returns DROP while no tracer listens to the span tracepoint; else asks ``parent``.

    ``parent`` defaults to the SDK's default, ``ParentBased(ALWAYS_ON)``. ``prefix``,
    ``tracefs``, ``user_events_data``, ``format`` and ``eventheader_keyword`` must match the
    span exporter's (they default to the same environment variables). The sampler registers
    the span tracepoint itself: a tracepoint of the same format is the same tracepoint, so
    its enable bit is the exporter's. Without user_events, nobody can listen, and every span
    is dropped.
    """

    def __init__(
        self,
        parent: Sampler | None = None,
        *,
        prefix: str | None = None,
        tracefs: str | None = None,
        multi_format: bool | None = None,
        user_events_data: str | None = None,
        format: str | None = None,  # noqa: A002 - the exporters' option
        eventheader_keyword: int | None = None,
    ) -> None:
        self.parent = parent if parent is not None else ParentBased(ALWAYS_ON)
        config = ExporterConfig.from_arguments(
            prefix=prefix,
            tracefs=tracefs,
            multi_format=multi_format,
            user_events_data=user_events_data,
            format=format,
            eventheader_keyword=eventheader_keyword,
        )
        self._writer = EventWriter(
            config.tracefs,
            span_tracepoints(config),
            config.multi_format and config.format != EVENTHEADER,
            config.user_events_data,
            refused=config.refused is not None,
        )
        self.registration = self._writer.registrations["span"]
        self._word = enable_word(self.registration)

    @property
    def enabled(self) -> bool:
        """True while a tracer listens to the span tracepoint (one memory read)."""
        return self._word[0] != 0

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        try:
            if self._word[0]:
                return self.parent.should_sample(
                    parent_context, trace_id, name, kind, attributes, links, trace_state
                )
            # Dropped, but the parent's trace state still travels on, as the SDK's do.
            parent = get_current_span(parent_context).get_span_context()
            if parent.is_valid and parent.trace_state:
                return SamplingResult(Decision.DROP, None, parent.trace_state)
        except Exception as exc:  # noqa: BLE001 - never into the application: the span drops
            self._writer.report(
                ("should_sample", type(exc)),
                "user_events sampler: span dropped, the sampler raised %s: %.200s",
                type(exc).__name__,
                exc,
            )
        return _DROP

    def get_description(self) -> str:
        return f"UserEventsSampler{{{self.parent.get_description()}}}"

    def close(self) -> None:
        """Unregister the tracepoint; the sampler then drops every span."""
        self._word = enable_word(None)
        self._writer.close()


def sampler_factory(argument: str | None = None) -> UserEventsSampler:
    """``OTEL_TRACES_SAMPLER=user_events`` (and ``user_events`` in a configuration file's
    sampler): the parent is ``ParentBased(ALWAYS_ON)``, or, when ``OTEL_TRACES_SAMPLER_ARG``
    is a ratio, ``ParentBased(TraceIdRatioBased(ratio))``."""
    text = (argument or "").strip()
    if not text:
        return UserEventsSampler()
    try:
        ratio = float(text)
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(text)
    except ValueError:
        _logger.warning(
            "user_events sampler: OTEL_TRACES_SAMPLER_ARG=%r is not a ratio in 0..1; "
            "sampling every span while listened",
            text,
        )
        return UserEventsSampler()
    return UserEventsSampler(ParentBased(TraceIdRatioBased(ratio)))
