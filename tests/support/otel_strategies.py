# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Hypothesis strategies for arbitrary OpenTelemetry values, spans and log records.

Texts are drawn from every Unicode category, lone surrogates (what ``surrogateescape``
makes of invalid UTF-8) and NUL included. Spans and log records are built directly, as a
custom processor could hand them over, so values skip the SDK's attribute validation.
"""

from __future__ import annotations

import unicodedata

from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

U64 = 2**64 - 1

texts = st.text(st.characters(exclude_categories=()), max_size=12)
"""Any Python string: every category, surrogates (Cs) and unassigned code points (Cn) too."""

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),  # around the 64-bit edges
    st.sampled_from([2**63, -(2**63) - 1, U64 + 1, 2**2048, -(2**3000)]),
    st.floats(),  # NaN, ±Inf, -0.0 included
    texts,
    st.binary(max_size=12),
)
any_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)
    ),
    max_leaves=12,
)
"""Any OpenTelemetry AnyValue."""

attributes = st.dictionaries(texts, any_values, max_size=6)

contexts = st.builds(
    SpanContext,
    trace_id=st.integers(1, 2**128 - 1),
    span_id=st.integers(1, U64),
    is_remote=st.booleans(),
    trace_flags=st.integers(0, 255).map(TraceFlags),
    trace_state=st.sampled_from(
        [TraceState(), TraceState([("vendor", "v1")]), TraceState([("a", "1"), ("t@b", "x.y")])]
    ),
)
scopes = st.builds(
    InstrumentationScope,
    name=texts,
    version=st.none() | texts,
    schema_url=st.none() | texts,
    attributes=st.none() | attributes,
)


@st.composite
def spans(draw: st.DrawFn) -> ReadableSpan:
    start = draw(st.integers(0, U64))
    status = draw(
        st.one_of(
            st.just(Status(StatusCode.UNSET)),
            st.just(Status(StatusCode.OK)),
            texts.map(lambda text: Status(StatusCode.ERROR, text)),
        )
    )
    events = st.builds(Event, name=texts, attributes=attributes, timestamp=st.integers(0, U64))
    return ReadableSpan(
        name=draw(texts),
        context=draw(contexts),
        parent=draw(st.none() | contexts),
        attributes=draw(attributes),
        events=draw(st.lists(events, max_size=3)),
        links=draw(st.lists(st.builds(Link, contexts, attributes), max_size=3)),
        kind=draw(st.sampled_from(SpanKind)),
        status=status,
        start_time=start,
        end_time=draw(st.integers(start, U64)),
        instrumentation_scope=draw(scopes),
    )


@st.composite
def log_records(draw: st.DrawFn) -> ReadableLogRecord:
    context = draw(st.none() | contexts)
    record = LogRecord(
        timestamp=draw(st.none() | st.integers(0, U64)),
        observed_timestamp=draw(st.integers(1, U64)),
        context=trace.set_span_in_context(trace.NonRecordingSpan(context)) if context else None,
        severity_text=draw(st.none() | texts),
        severity_number=draw(st.none() | st.sampled_from(SeverityNumber)),
        body=draw(any_values),
        attributes=draw(attributes),
        event_name=draw(st.none() | texts),
    )
    return ReadableLogRecord(
        log_record=record, resource=Resource({}), instrumentation_scope=draw(scopes)
    )


def one_of_each_category() -> dict[str, str]:
    """One character of every Unicode general category (Cn: an unassigned code point)."""
    found: dict[str, str] = {}
    for code in range(0x110000):
        found.setdefault(unicodedata.category(chr(code)), chr(code))
    return found
