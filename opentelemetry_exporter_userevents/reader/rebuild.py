# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Decoded records back into the SDK's own types: ``ReadableSpan`` and ``ReadableLogRecord``.

Each record carries a ``resource_id``; the resource itself arrives on its own tracepoint
(see docs/schema.md). Records whose resource is not known yet wait for it, up to
``resource_wait`` seconds, and are then released with an empty resource (counted). Values
come back as the SDK stores them: attribute sequences as tuples, dropped counts in
``BoundedAttributes``/``BoundedList``, one Resource and one InstrumentationScope object per
distinct value (the OTLP encoder groups by them).

The one field a record does not carry is the parent's own trace flags and trace state
(the SDK keeps them in ``span.parent``; OTLP does not export them): the span's are used.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.attributes import BoundedAttributes
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

from opentelemetry_exporter_userevents.reader.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.rebuild_metrics import MetricPoint, rebuild_point
from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record import json_keys as key
from opentelemetry_exporter_userevents.record.flags import (
    LOG_EVENT_NAME,
    LOG_SEVERITY_TEXT,
    PARENT_PRESENT,
    PARENT_REMOTE,
)
from opentelemetry_exporter_userevents.record.plain_text import decode_plain
from opentelemetry_exporter_userevents.record.tracepoints import (
    METRIC_KINDS,
    RESOURCE_KIND,
    SPAN_KIND,
    parse_tracepoint,
)

Telemetry = ReadableSpan | ReadableLogRecord | MetricPoint

_NO_CONTEXT = set_span_in_context(NonRecordingSpan(SpanContext(0, 0, False)), Context())


@dataclass
class RebuildStats:
    spans: int = 0
    logs: int = 0
    metric_points: int = 0
    resources: int = 0
    """Distinct resources learnt."""
    truncated: int = 0
    """Records the writer had to cut to fit (their ``truncated`` bits are set)."""
    without_resource: int = 0
    """Records released with an empty resource: theirs never arrived."""
    invalid: int = 0
    """Records whose texts did not decode (skipped)."""
    services: dict[str, int] = field(default_factory=dict)
    """Records rebuilt per service (``service.name`` of their resource, else the
    tracepoint prefix they came from)."""


def sdk_value(value: Any) -> Any:
    """A decoded value as the SDK stores it: lists become tuples, recursively."""
    if isinstance(value, list):
        return tuple(sdk_value(v) for v in value)
    if isinstance(value, dict):
        return {k: sdk_value(v) for k, v in value.items()}
    return value


def bounded_attributes(attributes: Mapping[str, Any], dropped: int = 0) -> BoundedAttributes:
    bounded = BoundedAttributes(maxlen=None, attributes=sdk_value(attributes), immutable=True)
    bounded.dropped = dropped
    return bounded


def bounded_list(items: list[Any], dropped: int) -> BoundedList[Any]:
    bounded: BoundedList[Any] = BoundedList(None)
    bounded.extend(items)
    bounded.dropped = dropped
    return bounded


class Rebuilder:
    """Turns decoded records into ReadableSpan and ReadableLogRecord, resources joined."""

    def __init__(self, resource_wait: float = 11.0) -> None:
        self.resource_wait = resource_wait
        self.stats = RebuildStats()
        self._resources: dict[int, Resource] = {}
        self._scopes: dict[str, InstrumentationScope | None] = {}
        self._pending: dict[int, list[tuple[float, TraceRecord]]] = {}

    def add(self, records: list[TraceRecord]) -> list[Telemetry]:
        """Rebuild ``records`` (in order); return what is ready, including records that
        were waiting for a resource that has now arrived or waited too long."""
        ready: list[Telemetry] = []
        now = time.monotonic()
        for record in records:
            if record.kind == RESOURCE_KIND:
                learnt = self._learn_resource(record)
                if learnt is not None:
                    for _, waiting_record in self._pending.pop(learnt, ()):
                        self._rebuild(waiting_record, ready)
                continue
            record_rid: int = record.values["resource_id"]
            if record_rid in self._resources:
                self._rebuild(record, ready)
            else:
                self._pending.setdefault(record_rid, []).append((now, record))
        for pending_rid, waiting in list(self._pending.items()):
            if waiting and now - waiting[0][0] >= self.resource_wait:
                self._release(pending_rid, ready)
        return ready

    def flush(self) -> list[Telemetry]:
        """Release every waiting record, with an empty resource."""
        ready: list[Telemetry] = []
        for rid in list(self._pending):
            self._release(rid, ready)
        return ready

    @property
    def pending(self) -> int:
        return sum(len(w) for w in self._pending.values())

    def _release(self, rid: int, ready: list[Telemetry]) -> None:
        waiting = self._pending.pop(rid)
        self.stats.without_resource += len(waiting)
        for _, record in waiting:
            self._rebuild(record, ready, Resource.get_empty())

    def _learn_resource(self, record: TraceRecord) -> int | None:
        values = record.values
        rid: int = values["resource_id"]
        if rid in self._resources:
            return rid
        try:
            attributes = anyvalue.decode(values["attributes"])
            if not isinstance(attributes, dict):
                raise ValueError("resource attributes are not a JSON object")
            resource = Resource(sdk_value(attributes), decode_plain(values["schema_url"]) or None)
        except (ValueError, TypeError):
            self.stats.invalid += 1
            return None
        self._resources[rid] = resource
        self.stats.resources += 1
        return rid

    def _rebuild(
        self, record: TraceRecord, ready: list[Telemetry], resource: Resource | None = None
    ) -> None:
        if resource is None:
            resource = self._resources[record.values["resource_id"]]
        try:
            if record.kind == SPAN_KIND:
                ready.append(self.span(record.values, resource))
                self.stats.spans += 1
            elif record.kind in METRIC_KINDS:
                scope = self.scope(record.values["scope"])
                ready.append(rebuild_point(record.values, resource, scope, record.kind))
                self.stats.metric_points += 1
            else:
                ready.append(self.log(record.values, resource))
                self.stats.logs += 1
        except (ValueError, TypeError, KeyError):
            self.stats.invalid += 1
            return
        if record.values["truncated"]:
            self.stats.truncated += 1
        service = resource.attributes.get("service.name")
        if not isinstance(service, str):
            parsed = parse_tracepoint(record.tracepoint)
            service = f"prefix {parsed.prefix}" if parsed is not None else "unknown"
        self.stats.services[service] = self.stats.services.get(service, 0) + 1

    def scope(self, text: str) -> InstrumentationScope | None:
        """The scope of a record's ``scope`` JSON, one object per distinct text."""
        try:
            return self._scopes[text]
        except KeyError:
            pass
        value = anyvalue.decode(text)
        scope = None
        if value:
            scope = InstrumentationScope(
                value[key.NAME],
                value.get(key.VERSION),
                value.get(key.SCHEMA_URL),
                bounded_attributes(value.get(key.ATTRIBUTES) or {}),
            )
        if len(self._scopes) > 1024:
            self._scopes.clear()
        self._scopes[text] = scope
        return scope

    def span(self, values: Mapping[str, Any], resource: Resource) -> ReadableSpan:
        """A ReadableSpan from the fields of an ``otel_span`` record."""
        trace_id = int(values["trace_id"], 16)
        flags = TraceFlags(values["trace_flags"])
        trace_state = _trace_state(decode_plain(values["trace_state"]))
        parent = None
        if values["parent_flags"] & PARENT_PRESENT:
            parent = SpanContext(
                trace_id,
                int(values["parent_span_id"], 16),
                is_remote=bool(values["parent_flags"] & PARENT_REMOTE),
                trace_flags=flags,
                trace_state=trace_state,
            )
        events = [
            Event(
                event[key.NAME],
                bounded_attributes(event[key.ATTRIBUTES], event.get(key.DROPPED, 0)),
                event[key.TIME_NS],
            )
            for event in anyvalue.decode(values["events"])
        ]
        links = [
            Link(
                SpanContext(
                    int(link[key.TRACE_ID], 16),
                    int(link[key.SPAN_ID], 16),
                    is_remote=link[key.IS_REMOTE],
                    trace_flags=TraceFlags(link[key.TRACE_FLAGS]),
                    trace_state=_trace_state(link[key.TRACE_STATE]),
                ),
                bounded_attributes(link[key.ATTRIBUTES], link.get(key.DROPPED, 0)),
            )
            for link in anyvalue.decode(values["links"])
        ]
        code = StatusCode(values["status_code"])
        description = decode_plain(values["status_description"]) or None
        return ReadableSpan(
            name=decode_plain(values["name"]),
            context=SpanContext(
                trace_id,
                int(values["span_id"], 16),
                is_remote=False,
                trace_flags=flags,
                trace_state=trace_state,
            ),
            parent=parent,
            resource=resource,
            attributes=bounded_attributes(
                anyvalue.decode(values["attributes"]), values["dropped_attributes"]
            ),
            events=bounded_list(events, values["dropped_events"]),
            links=bounded_list(links, values["dropped_links"]),
            kind=SpanKind(values["kind"]),
            status=Status(code, description if code is StatusCode.ERROR else None),
            start_time=values["start_time_ns"],
            end_time=values["end_time_ns"],
            instrumentation_scope=self.scope(values["scope"]),
        )

    def log(self, values: Mapping[str, Any], resource: Resource) -> ReadableLogRecord:
        """A ReadableLogRecord from the fields of an ``otel_log_*`` record."""
        flags = values["flags"]
        number = values["severity_number"]
        record = LogRecord(
            timestamp=values["time_ns"] or None,
            observed_timestamp=values["observed_time_ns"],
            context=_NO_CONTEXT,
            severity_text=decode_plain(values["severity_text"])
            if flags & LOG_SEVERITY_TEXT
            else None,
            severity_number=SeverityNumber(number) if number else None,
            body=anyvalue.decode(values["body"]),  # the SDK keeps a body as it was given
            event_name=decode_plain(values["event_name"]) if flags & LOG_EVENT_NAME else None,
        )
        # Set after construction: LogRecord takes ids from its context, not from 0 values.
        record.trace_id = int(values["trace_id"], 16)
        record.span_id = int(values["span_id"], 16)
        record.trace_flags = TraceFlags(values["trace_flags"])
        record.attributes = bounded_attributes(
            anyvalue.decode(values["attributes"]), values["dropped_attributes"]
        )
        return ReadableLogRecord(
            log_record=record, resource=resource, instrumentation_scope=self.scope(values["scope"])
        )


def _trace_state(header: str) -> TraceState:
    return TraceState.from_header([header]) if header else TraceState()
