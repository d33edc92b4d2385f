# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Joined spans and logs (:class:`.JoinedRecord`) as the SDK's own ``ReadableSpan`` and
``ReadableLogRecord``, for an output that hands them to an SDK exporter or reads them
(the tree view, ``--exporter`` other than ``otlp_proto_http``). OTLP/JSON and the direct
OTLP/HTTP sender never build them: they write checked records straight.

Values come back as the SDK stores them (:mod:`..join.sdk_values`, which the join uses
for resources and scopes too): attribute sequences as tuples, dropped counts in
``BoundedAttributes``/``BoundedList``. Resource and
InstrumentationScope are the joined record's own objects (the join keeps one per distinct
value: the OTLP encoder groups by them).

The one field a record does not carry is the parent's own trace flags and trace state
(the SDK keeps them in ``span.parent``; OTLP does not export them): the span's are used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.context import Context
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from opentelemetry_exporter_userevents.reader.decode.checked_records import CheckedLog, CheckedSpan
from opentelemetry_exporter_userevents.reader.join.joined_record import JoinedRecord
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint
from opentelemetry_exporter_userevents.reader.join.sdk_values import bounded_attributes

SdkTelemetry = ReadableSpan | ReadableLogRecord | MetricPoint
"""What an output that needs SDK objects reads: spans and logs built, metric points as
the join made them."""

_NO_CONTEXT = set_span_in_context(NonRecordingSpan(SpanContext(0, 0, False)), Context())


def sdk_object(joined: JoinedRecord) -> ReadableSpan | ReadableLogRecord:
    """The ReadableSpan or ReadableLogRecord of a joined span or log. Raises TypeError for a
    worker's record (already encoded: no SDK object), and whatever the SDK raises for
    checked values it still refuses."""
    checked = joined.checked
    if type(checked) is CheckedSpan:
        return readable_span(checked, joined.resource, joined.scope)
    if type(checked) is CheckedLog:
        return readable_log(checked, joined.resource, joined.scope)
    raise TypeError(f"no SDK object for {type(checked).__name__}")


def sdk_objects(items: Sequence[object]) -> tuple[list[SdkTelemetry], int]:
    """``items`` with each JoinedRecord built into its SDK object (in order; metric points
    and SDK objects as they are); and how many could not be built (left out)."""
    built: list[SdkTelemetry] = []
    failed = 0
    for item in items:
        if type(item) is JoinedRecord:
            try:
                built.append(sdk_object(item))
            except Exception:  # noqa: BLE001 - checked values the SDK still refused: count
                failed += 1
        elif isinstance(item, ReadableSpan | ReadableLogRecord | MetricPoint):
            built.append(item)
        else:
            failed += 1
    return built, failed


def bounded_list(items: list[Any], dropped: int) -> BoundedList[Any]:
    bounded: BoundedList[Any] = BoundedList(None)
    bounded.extend(items)
    bounded.dropped = dropped
    return bounded


def readable_span(
    checked: CheckedSpan, resource: Resource, scope: InstrumentationScope | None
) -> ReadableSpan:
    """A ReadableSpan from a checked ``otel_span`` record."""
    trace_id = checked.trace_id
    flags = TraceFlags(checked.trace_flags)
    trace_state = TraceState(list(checked.trace_state)) if checked.trace_state else TraceState()
    parent = None
    if checked.parent_span_id is not None:
        parent = SpanContext(
            trace_id,
            checked.parent_span_id,
            is_remote=checked.parent_is_remote,
            trace_flags=flags,
            trace_state=trace_state,
        )
    events = [
        Event(event.name, bounded_attributes(event.attributes, event.dropped), event.time_ns)
        for event in checked.events
    ]
    links = [
        Link(
            SpanContext(
                link.trace_id,
                link.span_id,
                is_remote=link.is_remote,
                trace_flags=TraceFlags(link.trace_flags),
                trace_state=TraceState(list(link.trace_state))
                if link.trace_state
                else TraceState(),
            ),
            bounded_attributes(link.attributes, link.dropped),
        )
        for link in checked.links
    ]
    code = StatusCode(checked.status_code)
    description = checked.status_description or None
    return ReadableSpan(
        name=checked.name,
        context=SpanContext(
            trace_id,
            checked.span_id,
            is_remote=False,
            trace_flags=flags,
            trace_state=trace_state,
        ),
        parent=parent,
        resource=resource,
        attributes=bounded_attributes(checked.attributes, checked.dropped_attributes),
        events=bounded_list(events, checked.dropped_events),
        links=bounded_list(links, checked.dropped_links),
        kind=SpanKind(checked.kind),
        status=Status(code, description if code is StatusCode.ERROR else None),
        start_time=checked.start_time_ns,
        end_time=checked.end_time_ns,
        instrumentation_scope=scope,
    )


def readable_log(
    checked: CheckedLog, resource: Resource, scope: InstrumentationScope | None
) -> ReadableLogRecord:
    """A ReadableLogRecord from a checked ``otel_log_*`` record."""
    number = checked.severity_number
    record = LogRecord(
        timestamp=checked.time_ns or None,
        observed_timestamp=checked.observed_time_ns,
        context=_NO_CONTEXT,
        severity_text=checked.severity_text,
        severity_number=SeverityNumber(number) if number else None,
        body=checked.body,  # the SDK keeps a body as it was given
        event_name=checked.event_name,
    )
    # Set after construction: LogRecord takes ids from its context, not from 0 values.
    record.trace_id = checked.trace_id
    record.span_id = checked.span_id
    record.trace_flags = TraceFlags(checked.trace_flags)
    record.attributes = bounded_attributes(checked.attributes, checked.dropped_attributes)
    return ReadableLogRecord(log_record=record, resource=resource, instrumentation_scope=scope)
