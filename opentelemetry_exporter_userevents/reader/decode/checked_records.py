# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Records past the validation boundary (:mod:`.validation`): each field a plain Python
value of the type its schema gives it, decoded from its text, so what is built from them
(SDK objects, OTLP, the tree view) needs no check of its own.

A span, log or metric point also carries what the join reads of it (its resource id, the
writer's ``truncated`` bits, and where it came from: the kernel's timestamp, the writer's
pid, the tracepoint), so nothing past the boundary reads a raw decoded value. Those come
last, with defaults, so a record made by hand (a test, an encoder's example) may leave them
out; the checker always sets them."""

from __future__ import annotations

from typing import Any, NamedTuple

Attributes = dict[str, Any]
"""Decoded attributes: str keys, values as the value encoding gives them (lists, not
tuples; the join_stage turns them into what the SDK keeps)."""

TraceStatePairs = tuple[tuple[str, str], ...]


class CheckedScope(NamedTuple):
    name: str
    version: str | None
    schema_url: str | None
    attributes: Attributes


class CheckedEvent(NamedTuple):
    name: str
    time_ns: int
    attributes: Attributes
    dropped: int


class CheckedLink(NamedTuple):
    trace_id: int
    span_id: int
    trace_flags: int
    trace_state: TraceStatePairs
    is_remote: bool
    attributes: Attributes
    dropped: int


class CheckedSpan(NamedTuple):
    trace_id: int
    span_id: int
    parent_span_id: int | None
    """None for a root span."""
    parent_is_remote: bool
    trace_flags: int
    trace_state: TraceStatePairs
    name: str
    kind: int
    status_code: int
    status_description: str
    start_time_ns: int
    end_time_ns: int
    attributes: Attributes
    dropped_attributes: int
    events: list[CheckedEvent]
    dropped_events: int
    links: list[CheckedLink]
    dropped_links: int
    scope_text: str
    """The scope's text, the key under which its checked value and rebuilt object are kept."""
    scope: CheckedScope | None
    resource_id: int = 0
    """The id of the resource its record joins (record.resource_id)."""
    truncated: int = 0
    """The writer's ``truncated`` bits (record.flags TRUNCATED_*): 0 when it cut nothing."""
    timestamp: int = 0
    """The kernel's time of the write (:attr:`.decoder.TraceRecord.timestamp`)."""
    pid: int = 0
    """The writer's pid (the kernel's ``common_pid``)."""
    tracepoint: str = ""
    """The tracepoint it came from (its prefix names a service without resource)."""


class CheckedLog(NamedTuple):
    time_ns: int
    observed_time_ns: int
    trace_id: int
    span_id: int
    trace_flags: int
    severity_number: int
    """0 when unset."""
    severity_text: str | None
    event_name: str | None
    body: Any
    attributes: Attributes
    dropped_attributes: int
    scope_text: str
    scope: CheckedScope | None
    resource_id: int = 0
    """The id of the resource its record joins (record.resource_id)."""
    truncated: int = 0
    """The writer's ``truncated`` bits (record.flags TRUNCATED_*): 0 when it cut nothing."""
    timestamp: int = 0
    """The kernel's time of the write (:attr:`.decoder.TraceRecord.timestamp`)."""
    pid: int = 0
    """The writer's pid (the kernel's ``common_pid``)."""
    tracepoint: str = ""
    """The tracepoint it came from (its prefix names a service without resource)."""


class CheckedResource(NamedTuple):
    resource_id: int
    attributes: Attributes
    schema_url: str
    pid: int = 0
    """The announcer's pid (the kernel's ``common_pid``)."""


class CheckedExemplar(NamedTuple):
    attributes: Attributes
    value: int | float
    time_ns: int
    span_id: int | None
    trace_id: int | None


class CheckedMetric(NamedTuple):
    kind: int
    """record.metric_values KIND_*."""
    name: str
    description: str
    unit: str
    temporality: int
    monotonic: bool
    start_time_ns: int
    time_ns: int
    attributes: Attributes
    exemplars: list[CheckedExemplar]
    value: int | float
    """Sums and gauges: the value (int or float, exactly as written); histograms: 0."""
    measurements: int
    """Histograms: the point's count."""
    sum: int | float
    min: int | float
    max: int | float
    bounds: list[float]
    """Explicit histograms: the bucket bounds."""
    counts: list[int]
    """Explicit histograms: the bucket counts."""
    scale: int
    zero_count: int
    positive: tuple[int, list[int]]
    """Exponential histograms: (offset, bucket counts) of each side."""
    negative: tuple[int, list[int]]
    histogram_flags: int
    dropped_attributes: int
    dropped_exemplars: int
    truncated: int
    """The writer's ``truncated`` bits (record.flags TRUNCATED_*): 0 when it cut nothing."""
    scope_text: str
    scope: CheckedScope | None
    resource_id: int = 0
    """The id of the resource its record joins (record.resource_id)."""
    timestamp: int = 0
    """The kernel's time of the write (:attr:`.decoder.TraceRecord.timestamp`)."""
    pid: int = 0
    """The writer's pid (the kernel's ``common_pid``)."""
    tracepoint: str = ""
    """The tracepoint it came from (its prefix names a service without resource)."""
