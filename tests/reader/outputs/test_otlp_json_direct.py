# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OTLP/JSON written straight from checked records equals what the OTLP exporters' encoder
and protobuf's JSON mapping make of the SDK objects the join_stage builds from them."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedEvent,
    CheckedLink,
    CheckedLog,
    CheckedScope,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord, JoinStage
from opentelemetry_exporter_userevents.reader.join.sdk_values import sdk_attributes
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json, otlp_json_direct
from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_objects import sdk_object
from tests.support.otel_strategies import any_values, texts

U64 = 2**64 - 1
U32 = 2**32 - 1
keys = st.one_of(texts, st.sampled_from(["", "k", "service.name"]))
attributes = st.dictionaries(keys, any_values, max_size=5)
trace_states = st.sampled_from([(), (("vendor", "v1"),), (("a", "1"), ("t@b", "x.y"))])
times = st.one_of(st.just(0), st.integers(0, U64))
counts = st.one_of(st.just(0), st.integers(0, U32))
optional_texts = st.one_of(st.none(), texts)

checked_scopes = st.one_of(
    st.none(), st.builds(CheckedScope, texts, optional_texts, optional_texts, attributes)
)
events = st.builds(CheckedEvent, texts, times, attributes, counts)
links = st.builds(
    CheckedLink,
    st.integers(0, 2**128 - 1),
    st.integers(0, U64),
    st.integers(0, 255),
    trace_states,
    st.booleans(),
    attributes,
    counts,
)


@st.composite
def checked_spans(draw: st.DrawFn) -> CheckedSpan:
    return CheckedSpan(
        trace_id=draw(st.integers(1, 2**128 - 1)),
        span_id=draw(st.integers(1, U64)),
        parent_span_id=draw(st.one_of(st.none(), st.integers(0, U64))),
        parent_is_remote=draw(st.booleans()),
        trace_flags=draw(st.integers(0, 255)),
        trace_state=draw(trace_states),
        name=draw(texts),
        kind=draw(st.integers(0, 4)),
        status_code=draw(st.integers(0, 2)),
        status_description=draw(texts),
        start_time_ns=draw(times),
        end_time_ns=draw(times),
        attributes=draw(attributes),
        dropped_attributes=draw(counts),
        events=draw(st.lists(events, max_size=3)),
        dropped_events=draw(counts),
        links=draw(st.lists(links, max_size=2)),
        dropped_links=draw(counts),
        scope_text="",  # set by the batch: the key of the scope object
        scope=None,
    )


@st.composite
def checked_logs(draw: st.DrawFn) -> CheckedLog:
    return CheckedLog(
        time_ns=draw(times),
        observed_time_ns=draw(times),
        trace_id=draw(st.one_of(st.just(0), st.integers(0, 2**128 - 1))),
        span_id=draw(st.one_of(st.just(0), st.integers(0, U64))),
        trace_flags=draw(st.integers(0, 255)),
        severity_number=draw(st.integers(0, 24)),
        severity_text=draw(optional_texts),
        event_name=draw(optional_texts),
        body=draw(any_values),
        attributes=draw(attributes),
        dropped_attributes=draw(counts),
        scope_text="",
        scope=None,
    )


resources = st.builds(
    lambda attrs, url: Resource(sdk_attributes(attrs), url or None),
    st.dictionaries(keys, any_values, max_size=3),
    st.one_of(st.just(""), texts),
)


@st.composite
def batches(draw: st.DrawFn, records: st.SearchStrategy[Any]) -> list[JoinedRecord]:
    """Records of a few resources and scopes, as the join_stage joins them: one object per
    distinct resource id or scope text, but also distinct objects of equal value (two ids,
    or two texts, for the same value) and the empty resource."""
    pool = draw(st.lists(resources, min_size=1, max_size=3))
    pool += [Resource(dict(r.attributes), r.schema_url or None) for r in pool[:1]]
    pool.append(Resource.get_empty())
    join_stage = JoinStage()
    scope_pool = [
        join_stage.scope(str(number), checked)
        for number, checked in enumerate(draw(st.lists(checked_scopes, min_size=1, max_size=3)))
    ]
    scope_pool.append(join_stage.scope("again", scope_pool[0] and _checked_scope(scope_pool[0])))
    batch = []
    for checked in draw(st.lists(records, min_size=1, max_size=6)):
        resource = draw(st.sampled_from(pool))
        scope = draw(st.sampled_from(scope_pool))
        batch.append(JoinedRecord(checked, resource, scope))
    return batch


def _checked_scope(scope: Any) -> CheckedScope:
    return CheckedScope(scope.name, scope.version, scope.schema_url, dict(scope.attributes))


@contextmanager
def _quiet() -> Iterator[None]:
    """The encoder and the SDK log each value they leave out."""
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def _sdk_path(batch: list[JoinedRecord]) -> tuple[Any, int]:
    built: list[Any] = [sdk_object(joined) for joined in batch]
    request = (
        otlp_json.spans_request
        if isinstance(batch[0].checked, CheckedSpan)
        else otlp_json.logs_request
    )
    encoded, failed = otlp_json.skipping_unrepresentable(request, built)  # type: ignore[arg-type]
    return (None if encoded is None else otlp_json.dumps(encoded)), failed


def _direct_path(batch: list[JoinedRecord]) -> tuple[Any, int]:
    if isinstance(batch[0].checked, CheckedSpan):
        return otlp_json_direct.spans_line(batch)
    return otlp_json_direct.logs_line(batch)


def _same(batch: list[JoinedRecord]) -> None:
    with _quiet():
        want, want_failed = _sdk_path(batch)
        got, got_failed = _direct_path(batch)
    assert got_failed == want_failed
    assert (got is None) == (want is None)
    if want is not None:
        assert json.loads(got) == json.loads(want)
        assert got == want  # the same text, key order included


@settings(max_examples=400, deadline=None)
@given(batches(checked_spans()))
def test_spans_equal_the_encoders(batch: list[JoinedRecord]) -> None:
    _same(batch)


@settings(max_examples=400, deadline=None)
@given(batches(checked_logs()))
def test_logs_equal_the_encoders(batch: list[JoinedRecord]) -> None:
    _same(batch)
