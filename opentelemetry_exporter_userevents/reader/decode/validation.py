# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's validation boundary: every field of a decoded record checked for the shape
its schema gives it, before anything is built from it.

Any local process that may write user_events can register our exact formats, share our
tracepoints and write records with any text. A record therefore reaches the reader well
formed for the kernel (its sizes and offsets were checked by the decoder) but with any JSON
in its texts: ``[1]`` where an object belongs, ids that are not hex, enums out of range.
:class:`RecordChecker` turns a record's raw values into ``Checked*`` tuples of plain
Python values of the right types, or raises :class:`InvalidRecord` with a reason from a
fixed vocabulary (``span.attributes: not a JSON object``): reasons are counted per reason,
so they must never carry the writer's text. What is built from checked values (SDK objects,
OTLP, the tree view) needs no check of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    Attributes,
    CheckedEvent,
    CheckedExemplar,
    CheckedLink,
    CheckedLog,
    CheckedMetric,
    CheckedResource,
    CheckedScope,
    CheckedSpan,
    TraceStatePairs,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record import json_keys as key
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.flags import (
    LOG_EVENT_NAME,
    LOG_SEVERITY_TEXT,
    METRIC_MAX_INT,
    METRIC_MIN_INT,
    METRIC_SUM_INT,
    METRIC_VALUE_BIG,
    METRIC_VALUE_INT,
    PARENT_PRESENT,
    PARENT_REMOTE,
    TRUNCATED_TEXT,
)
from opentelemetry_exporter_userevents.record.plain_text import decode_plain
from opentelemetry_exporter_userevents.record.resource_id import hash_resource
from opentelemetry_exporter_userevents.record.tracepoints import (
    LOG_KIND,
    METRIC_EXP_HISTOGRAM_KIND,
    METRIC_GAUGE_KIND,
    METRIC_HISTOGRAM_KIND,
    METRIC_KINDS,
    METRIC_SUM_KIND,
    RESOURCE_KIND,
    SPAN_KIND,
)

_HEX32 = re.compile(r"[0-9a-f]{32}").fullmatch
_HEX16 = re.compile(r"[0-9a-f]{16}").fullmatch
# W3C Trace Context, tracestate list-member (key "=" value), as the SDK checks it.
_TRACE_STATE_MEMBER = re.compile(
    r"([a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
    r"=([\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e])"
).fullmatch
_TRACE_STATE_MAX_MEMBERS = 32
_U64_MAX = (1 << 64) - 1
_SPAN_KINDS = range(5)
_STATUS_CODES = range(3)
_SEVERITY_NUMBERS = range(25)
"""0 is unset; 1..24 the OpenTelemetry severity numbers."""
_TEMPORALITIES = range(3)
_SCOPE_CACHE = 1024


Checked = CheckedSpan | CheckedLog | CheckedMetric
"""A span, log or metric point past the boundary."""


class InvalidRecord(ValueError):
    """A record whose fields do not have the shape the schema gives them."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        """``<kind>.<field>: <what is wrong>``, from a fixed vocabulary (no record text)."""


_METRIC_KINDS = {
    METRIC_SUM_KIND: mv.KIND_SUM,
    METRIC_GAUGE_KIND: mv.KIND_GAUGE,
    METRIC_HISTOGRAM_KIND: mv.KIND_HISTOGRAM,
    METRIC_EXP_HISTOGRAM_KIND: mv.KIND_EXP_HISTOGRAM,
}


# --- field checks: each raises InvalidRecord(f"{where}: ...") -------------------------


def _json(text: str, where: str) -> Any:
    try:
        return anyvalue.decode(text)
    except (ValueError, TypeError, RecursionError):
        raise InvalidRecord(f"{where}: not in the value encoding") from None


def _plain(text: str, where: str) -> str:
    try:
        return decode_plain(text)
    except (ValueError, TypeError, RecursionError):
        raise InvalidRecord(f"{where}: not a plain text") from None


def _object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise InvalidRecord(f"{where}: not a JSON object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if type(value) is not list:
        raise InvalidRecord(f"{where}: not a JSON list")
    return value


def _str(value: Any, where: str) -> str:
    if type(value) is not str:
        raise InvalidRecord(f"{where}: not a string")
    return value


def _optional_str(value: Any, where: str) -> str | None:
    return None if value is None else _str(value, where)


def _int(value: Any, where: str, low: int = -_U64_MAX, high: int = _U64_MAX) -> int:
    if type(value) is not int:
        raise InvalidRecord(f"{where}: not an integer")
    if not low <= value <= high:
        raise InvalidRecord(f"{where}: out of range")
    return value


def _count(value: Any, where: str) -> int:
    return _int(value, where, 0, _U64_MAX)


def _number(value: Any, where: str) -> int | float:
    """A JSON number (int or float, never a bool), as it came."""
    if type(value) is not int and type(value) is not float:
        raise InvalidRecord(f"{where}: not a number")
    return value


def _enum(value: int, allowed: range, where: str) -> int:
    if value not in allowed:
        raise InvalidRecord(f"{where}: out of range")
    return value


def _hex(text: Any, match: Callable[[str], Any], where: str) -> int:
    if type(text) is not str or match(text) is None:
        raise InvalidRecord(f"{where}: not lowercase hex of the right length")
    return int(text, 16)


def _attributes(text: str, where: str) -> Attributes:
    return _object(_json(text, where), where)


def trace_state(header: str, where: str, truncated: bool = False) -> TraceStatePairs:
    """The (key, value) members of a W3C tracestate header value, checked as the SDK's
    ``TraceState.from_header`` checks them (which, on a bad member, logs it raw and keeps
    nothing). A bad one raises, unless the writer cut the text to fit (``truncated``): then,
    as the SDK would, nothing is kept."""
    pairs: dict[str, str] = {}
    for member in header.split(","):
        member = member.strip(" \t")
        if not member:
            continue
        match = _TRACE_STATE_MEMBER(member)
        if match is None or match[1] in pairs or len(pairs) == _TRACE_STATE_MAX_MEMBERS:
            if truncated:
                return ()
            raise InvalidRecord(f"{where}: not a W3C tracestate")
        pairs[match[1]] = match[2]
    return tuple(pairs.items())


def _dropped(item: dict[str, Any], where: str) -> int:
    return _int(item.get(key.DROPPED, 0), f"{where}.dropped", 0, 0xFFFFFFFF)


class RecordChecker:
    """Checks records field by field; scopes, which repeat, are checked once per text
    (at most ``_SCOPE_CACHE`` texts kept)."""

    def __init__(self) -> None:
        self._scopes: dict[str, CheckedScope | None] = {}

    def scope(self, text: str, kind: str) -> CheckedScope | None:
        """The checked scope of a ``scope`` text; None for ``{}`` (no scope)."""
        try:
            return self._scopes[text]
        except KeyError:
            pass
        where = f"{kind}.scope"
        value = _object(_json(text, where), where)
        scope = None
        if value:
            scope = CheckedScope(
                _str(value.get(key.NAME), f"{where}.name"),
                _optional_str(value.get(key.VERSION), f"{where}.version"),
                _optional_str(value.get(key.SCHEMA_URL), f"{where}.schema_url"),
                _object(value.get(key.ATTRIBUTES, {}), f"{where}.attributes"),
            )
        if len(self._scopes) >= _SCOPE_CACHE:
            self._scopes.clear()
        self._scopes[text] = scope
        return scope

    def check(self, record: TraceRecord) -> Checked | CheckedResource:
        """``record`` checked as its kind says, with where it came from."""
        timestamp, kind, tracepoint, pid, values = record
        if kind == SPAN_KIND:
            return self.span(values, timestamp, pid, tracepoint)
        if kind == LOG_KIND:
            return self.log(values, timestamp, pid, tracepoint)
        if kind in METRIC_KINDS:
            return self.metric(values, kind, timestamp, pid, tracepoint)
        if kind == RESOURCE_KIND:
            return self.resource(values, pid)
        raise InvalidRecord(f"{kind}: not a kind the reader rebuilds")

    def span(
        self, values: Mapping[str, Any], timestamp: int = 0, pid: int = 0, tracepoint: str = ""
    ) -> CheckedSpan:
        trace_id = _hex(values["trace_id"], _HEX32, "span.trace_id")
        span_id = _hex(values["span_id"], _HEX16, "span.span_id")
        if trace_id == 0:
            raise InvalidRecord("span.trace_id: an invalid (all-zero) id")
        if span_id == 0:
            raise InvalidRecord("span.span_id: an invalid (all-zero) id")
        parent_flags = values["parent_flags"]
        parent = None
        if parent_flags & PARENT_PRESENT:
            parent = _hex(values["parent_span_id"], _HEX16, "span.parent_span_id")
        events = [
            self._event(item)
            for item in _list(_json(values["events"], "span.events"), "span.events")
        ]
        links = [
            self._link(item) for item in _list(_json(values["links"], "span.links"), "span.links")
        ]
        truncated = values["truncated"]
        # Positional, in field order (test_checked_fields_by_name): by keyword, the tuple's
        # generated __new__ matches every name, about 0.5 µs more a record.
        return CheckedSpan(
            trace_id,
            span_id,
            parent,
            bool(parent_flags & PARENT_REMOTE),
            values["trace_flags"],
            trace_state(
                _plain(values["trace_state"], "span.trace_state"),
                "span.trace_state",
                bool(truncated & TRUNCATED_TEXT),
            ),
            _plain(values["name"], "span.name"),
            _enum(values["kind"], _SPAN_KINDS, "span.kind"),
            _enum(values["status_code"], _STATUS_CODES, "span.status_code"),
            _plain(values["status_description"], "span.status_description"),
            values["start_time_ns"],
            values["end_time_ns"],
            _attributes(values["attributes"], "span.attributes"),
            values["dropped_attributes"],
            events,
            values["dropped_events"],
            links,
            values["dropped_links"],
            values["scope"],
            self.scope(values["scope"], "span"),
            values["resource_id"],
            truncated,
            timestamp,
            pid,
            tracepoint,
        )

    @staticmethod
    def _event(item: Any) -> CheckedEvent:
        event = _object(item, "span.events[]")
        return CheckedEvent(
            _str(event.get(key.NAME), "span.events[].name"),
            _count(event.get(key.TIME_NS), "span.events[].time_ns"),
            _object(event.get(key.ATTRIBUTES), "span.events[].attributes"),
            _dropped(event, "span.events[]"),
        )

    @staticmethod
    def _link(item: Any) -> CheckedLink:
        link = _object(item, "span.links[]")
        is_remote = link.get(key.IS_REMOTE)
        if type(is_remote) is not bool:
            raise InvalidRecord("span.links[].is_remote: not a boolean")
        return CheckedLink(
            _hex(link.get(key.TRACE_ID), _HEX32, "span.links[].trace_id"),
            _hex(link.get(key.SPAN_ID), _HEX16, "span.links[].span_id"),
            _int(link.get(key.TRACE_FLAGS), "span.links[].trace_flags", 0, 0xFF),
            trace_state(
                _str(link.get(key.TRACE_STATE), "span.links[].trace_state"),
                "span.links[].trace_state",
            ),
            is_remote,
            _object(link.get(key.ATTRIBUTES), "span.links[].attributes"),
            _dropped(link, "span.links[]"),
        )

    def log(
        self, values: Mapping[str, Any], timestamp: int = 0, pid: int = 0, tracepoint: str = ""
    ) -> CheckedLog:
        flags = values["flags"]
        # Positional, in field order (test_checked_fields_by_name): by keyword, the tuple's
        # generated __new__ matches every name, about 0.5 µs more a record.
        return CheckedLog(
            values["time_ns"],
            values["observed_time_ns"],
            _hex(values["trace_id"], _HEX32, "log.trace_id"),
            _hex(values["span_id"], _HEX16, "log.span_id"),
            values["trace_flags"],
            _enum(values["severity_number"], _SEVERITY_NUMBERS, "log.severity_number"),
            _plain(values["severity_text"], "log.severity_text")
            if flags & LOG_SEVERITY_TEXT
            else None,
            _plain(values["event_name"], "log.event_name") if flags & LOG_EVENT_NAME else None,
            _json(values["body"], "log.body"),
            _attributes(values["attributes"], "log.attributes"),
            values["dropped_attributes"],
            values["scope"],
            self.scope(values["scope"], "log"),
            values["resource_id"],
            values["truncated"],
            timestamp,
            pid,
            tracepoint,
        )

    @staticmethod
    def resource(values: Mapping[str, Any], pid: int = 0) -> CheckedResource:
        """Also checks the id: the hash of the record's own texts (record.resource_id)."""
        attributes_text: str = values["attributes"]
        schema_url_text: str = values["schema_url"]
        rid = values["resource_id"]
        if rid != hash_resource(attributes_text.encode(), schema_url_text.encode()):
            raise InvalidRecord("resource.resource_id: not the hash of the resource's texts")
        return CheckedResource(
            resource_id=rid,
            attributes=_attributes(attributes_text, "resource.attributes"),
            schema_url=_plain(schema_url_text, "resource.schema_url"),
            pid=pid,
        )

    def metric(
        self,
        values: Mapping[str, Any],
        tracepoint_kind: str | None,
        timestamp: int = 0,
        pid: int = 0,
        tracepoint: str = "",
    ) -> CheckedMetric:
        """A metric point; the tracepoint's kind (record.tracepoints METRIC_KINDS) says
        which, else the record's ``kind`` field."""
        if tracepoint_kind is not None:
            kind = _METRIC_KINDS[tracepoint_kind]
        else:
            kind = _enum(values["kind"], range(1, 5), "metric.kind")
        flags = values["flags"]
        value: Any = 0  # an int or a float once checked; the record's, untrusted, until then
        measurements = 0
        total: int | float = 0.0
        low: int | float = 0.0
        high: int | float = 0.0
        bounds: list[float] = []
        counts: list[int] = []
        scale = zero_count = histogram_flags = 0
        positive: tuple[int, list[int]] = (0, [])
        negative: tuple[int, list[int]] = (0, [])
        if kind in (mv.KIND_SUM, mv.KIND_GAUGE):
            if flags & METRIC_VALUE_BIG:
                value = _json(values["value_text"], "metric.value_text")
                if type(value) is not int:
                    raise InvalidRecord("metric.value_text: not an integer")
            elif flags & METRIC_VALUE_INT:
                value = values["value"]
            else:
                value = mv.bits_double(values["value_bits"])
        else:
            buckets = _object(_json(values["buckets"], "metric.buckets"), "metric.buckets")
            measurements = values["count"]
            total = _bits(values["sum_bits"], flags, METRIC_SUM_INT)
            low = _bits(values["min_bits"], flags, METRIC_MIN_INT)
            high = _bits(values["max_bits"], flags, METRIC_MAX_INT)
            if kind == mv.KIND_HISTOGRAM:
                counts = _counts(buckets.get(mv.COUNTS), "metric.buckets.counts")
                bounds = _numbers(buckets.get(mv.BOUNDS), "metric.buckets.bounds")
            else:
                scale = _int(buckets.get(mv.SCALE), "metric.buckets.scale")
                zero_count = _count(buckets.get(mv.ZERO_COUNT), "metric.buckets.zero_count")
                positive = _side(buckets.get(mv.POSITIVE), "metric.buckets.positive")
                negative = _side(buckets.get(mv.NEGATIVE), "metric.buckets.negative")
                histogram_flags = _count(buckets.get(mv.FLAGS), "metric.buckets.flags")
        exemplars = _json(values["exemplars"], "metric.exemplars")
        # Positional, in field order (test_checked_fields_by_name): by keyword, the tuple's
        # generated __new__ matches every name, about 0.5 µs more a record.
        return CheckedMetric(
            kind,
            _plain(values["name"], "metric.name"),
            _plain(values["description"], "metric.description"),
            _plain(values["unit"], "metric.unit"),
            _enum(values["temporality"], _TEMPORALITIES, "metric.temporality"),
            bool(values.get("is_monotonic", 0)),
            values["start_time_ns"],
            values["time_ns"],
            _attributes(values["attributes"], "metric.attributes"),
            [_exemplar(item) for item in _list(exemplars, "metric.exemplars")],
            value,
            measurements,
            total,
            low,
            high,
            bounds,
            counts,
            scale,
            zero_count,
            positive,
            negative,
            histogram_flags,
            values["dropped_attributes"],
            values["dropped_exemplars"],
            values["truncated"],
            values["scope"],
            self.scope(values["scope"], "metric"),
            values["resource_id"],
            timestamp,
            pid,
            tracepoint,
        )


def _bits(bits: int, flags: int, int_flag: int) -> int | float:
    return mv.bits_s64(bits) if flags & int_flag else mv.bits_double(bits)


def _numbers(values: Any, where: str) -> list[float]:
    for value in _list(values, where):
        _number(value, where)
    return values  # type: ignore[no-any-return]


def _counts(values: Any, where: str) -> list[int]:
    for value in _list(values, where):
        _count(value, where)
    return values  # type: ignore[no-any-return]


def _side(value: Any, where: str) -> tuple[int, list[int]]:
    side = _object(value, where)
    offset = _int(side.get(mv.OFFSET), f"{where}.offset")
    return offset, _counts(side.get(mv.COUNTS), f"{where}.counts")


def _exemplar(item: Any) -> CheckedExemplar:
    exemplar = _object(item, "metric.exemplars[]")
    trace_id = exemplar.get(mv.TRACE_ID)
    span_id = exemplar.get(mv.SPAN_ID)
    return CheckedExemplar(
        _object(exemplar.get(mv.ATTRIBUTES), "metric.exemplars[].attributes"),
        _number(exemplar.get(mv.VALUE), "metric.exemplars[].value"),
        _count(exemplar.get(mv.TIME_NS), "metric.exemplars[].time_ns"),
        None if span_id is None else _hex(span_id, _HEX16, "metric.exemplars[].span_id"),
        None if trace_id is None else _hex(trace_id, _HEX32, "metric.exemplars[].trace_id"),
    )
