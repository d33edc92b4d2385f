# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's validation boundary: a record that does not have its schema's shape is
skipped and counted by reason and writer pid, never raised, and its neighbours are unharmed;
resources are checked against their id; the join_stage's tables stay bounded."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics.export import NumberDataPoint
from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents._export.metric_encoder import PointItem, encode_point
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.reader.decode.checked_records import CheckedResource
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.decode.validation import (
    InvalidRecord,
    RecordChecker,
    trace_state,
)
from opentelemetry_exporter_userevents.reader.join import join_stage as join_module
from opentelemetry_exporter_userevents.record import anyvalue, flags, schema
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.resource_id import hash_resource
from opentelemetry_exporter_userevents.record.schema import METRIC_NUMBER
from tests.reader.join.test_join_stage import (
    RESOURCE_FORMAT,
    check_same_span,
    log_record,
    resource_record,
    span_record,
)
from tests.support.pages import record
from tests.support.records import format_of, same
from tests.support.sdk_rebuild import SdkRebuilder
from tests.support.span_fixtures import RESOURCE, make_logs, make_spans

HOSTILE_PID = 4242


def _hostile(good: TraceRecord, **fields: object) -> TraceRecord:
    return good._replace(pid=HOSTILE_PID, values={**good.values, **fields})


def _rid() -> int:
    return resource_record(RESOURCE).values["resource_id"]


@pytest.mark.parametrize(
    ("field", "text", "reason"),
    [
        ("attributes", "[1]", "span.attributes: not a JSON object"),
        ("attributes", '"x"', "span.attributes: not a JSON object"),
        ("attributes", "{", "span.attributes: not in the value encoding"),
        ("events", "{}", "span.events: not a JSON list"),
        ("events", "[1]", "span.events[]: not a JSON object"),
        ("events", '[{"name":1,"time_ns":0,"attributes":{}}]', "span.events[].name: not a string"),
        (
            "events",
            '[{"name":"e","time_ns":-1,"attributes":{}}]',
            "span.events[].time_ns: out of range",
        ),
        ("links", '[{"trace_id":"X"}]', "span.links[].is_remote: not a boolean"),
        ("scope", "[]", "span.scope: not a JSON object"),
        ("scope", '{"name":["\\u001b]0;pwned\\u0007"]}', "span.scope.name: not a string"),
        (
            "trace_id",
            "ABCDEF00000000000000000000000000",
            "span.trace_id: not lowercase hex of the right length",
        ),
        ("span_id", "00000000000000zz", "span.span_id: not lowercase hex of the right length"),
        ("kind", 9, "span.kind: out of range"),
        ("status_code", 3, "span.status_code: out of range"),
        ("trace_state", "a=1,\x1b]0;x", "span.trace_state: not a W3C tracestate"),
        ("name", '"\\ud800', "span.name: not a plain text"),
    ],
)
def test_a_span_of_the_wrong_shape_is_counted_by_reason_and_pid_and_its_neighbours_kept(
    field, text, reason
):
    spans = make_spans()
    rid = _rid()
    good = [span_record(span, rid) for span in spans]
    bad = _hostile(good[0], **{field: text})
    join_stage = SdkRebuilder()
    items = join_stage.add([resource_record(RESOURCE), good[0], bad, *good[1:]])
    assert join_stage.stats.invalid == 1
    assert join_stage.stats.invalid_reasons == {reason: 1}
    assert join_stage.stats.invalid_pids == {HOSTILE_PID: 1}
    assert len(items) == len(spans)
    for got, want in zip(items, spans, strict=True):
        check_same_span(got, want)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("severity_number", 25, "log.severity_number: out of range"),
        ("body", "{", "log.body: not in the value encoding"),
        ("attributes", "null", "log.attributes: not a JSON object"),
        ("trace_id", "-" * 32, "log.trace_id: not lowercase hex of the right length"),
    ],
)
def test_a_log_of_the_wrong_shape_is_counted(field, value, reason):
    logs = make_logs()
    join_stage = SdkRebuilder()
    good = [log_record(readable, _rid()) for readable in logs]
    items = join_stage.add([resource_record(RESOURCE), _hostile(good[0], **{field: value}), *good])
    assert join_stage.stats.invalid_reasons == {reason: 1}
    assert same([item.log_record.body for item in items], [r.log_record.body for r in logs])


def test_a_resource_whose_id_is_not_the_hash_of_its_texts_replaces_nothing():
    genuine = resource_record(RESOURCE)
    impostor_text = anyvalue.encode({"service.name": "impostor"}).encode()
    payload = schema.RESOURCE.pack((genuine.values["resource_id"], 1000), (impostor_text, b""))
    impostor = genuine._replace(
        pid=HOSTILE_PID, values=schema.RESOURCE.unpack(record(1, payload), RESOURCE_FORMAT)
    )
    span = span_record(make_spans()[0], genuine.values["resource_id"])
    for order in ([impostor, genuine, span], [genuine, impostor, span]):
        join_stage = SdkRebuilder()
        (item,) = join_stage.add(order)
        assert item.resource.attributes["service.name"] == RESOURCE.attributes["service.name"]
        assert join_stage.stats.invalid_reasons == {
            "resource.resource_id: not the hash of the resource's texts": 1
        }


def test_a_tracestate_the_writer_cut_is_dropped_as_the_sdk_would_and_any_other_bad_one_rejected():
    assert trace_state("a=1, b=2 ,", "w") == (("a", "1"), ("b", "2"))
    assert trace_state("a=1,a=2", "w", truncated=True) == ()
    assert trace_state("a=1,b…[truncated]", "w", truncated=True) == ()
    for bad in ("a=1,a=2", "A=1", "a=\x1b", ",".join(f"k{i}=v" for i in range(33))):
        with pytest.raises(InvalidRecord, match="^w: not a W3C tracestate$"):
            trace_state(bad, "w")


def test_a_span_cut_to_fit_keeps_its_span_with_an_empty_tracestate():
    good = span_record(make_spans()[0], _rid())
    cut = good._replace(
        values={
            **good.values,
            "trace_state": "vendor=abc…[truncated]",
            "truncated": flags.TRUNCATED_TEXT,
        }
    )
    checked = RecordChecker().span(cut.values)
    assert checked.trace_state == ()


def test_records_waiting_for_resources_never_announced_are_bounded_and_counted(monkeypatch):
    monkeypatch.setattr(join_module, "MAX_PENDING_RESOURCES", 8)
    monkeypatch.setattr(join_module, "MAX_PENDING_RECORDS", 20)
    good = span_record(make_spans()[0])
    join_stage = SdkRebuilder(resource_wait=float("inf"))
    released = []
    for rid in range(100):  # 100 distinct unknown ids, 3 records each
        for _ in range(3):
            released += join_stage.add([good._replace(values={**good.values, "resource_id": rid})])
        assert len(join_stage._pending) <= 8 and join_stage.pending <= 20
    assert join_stage.stats.pending_evicted == len(released) > 0
    released += join_stage.flush()
    assert len(released) == 300 == join_stage.stats.without_resource


def test_resources_and_services_are_bounded_and_evictions_counted(monkeypatch):
    monkeypatch.setattr(join_module, "MAX_RESOURCES", 4)
    monkeypatch.setattr(join_module, "MAX_SERVICES", 3)
    join_stage = SdkRebuilder()
    span = make_spans()[0]
    for number in range(10):
        resource = Resource({"service.name": f"svc{number}"})
        announced = resource_record(resource)
        join_stage.add([announced, span_record(span, announced.values["resource_id"])])
        assert len(join_stage._resources) <= 4
    assert join_stage.stats.resources == 10 and join_stage.stats.resources_evicted == 6
    assert len(join_stage.stats.services) == 3 and join_stage.stats.other_services == 7
    assert join_stage.stats.spans == 10


def test_invalid_pids_are_bounded(monkeypatch):
    monkeypatch.setattr(join_module, "MAX_INVALID_PIDS", 2)
    good = span_record(make_spans()[0])
    join_stage = SdkRebuilder()
    join_stage.add([good._replace(pid=pid, values={**good.values, "kind": 7}) for pid in range(5)])
    assert join_stage.stats.invalid == 5
    assert (
        join_stage.stats.invalid_pids == {0: 1, 1: 1} and join_stage.stats.invalid_other_pids == 3
    )


def test_reasons_carry_no_text_of_the_record():
    good = span_record(make_spans()[0])
    secret = "\x1b]0;pwned\x07"
    join_stage = SdkRebuilder()
    attributes = anyvalue.encode([secret])
    join_stage.add([good._replace(values={**good.values, "attributes": attributes})])
    (reason,) = join_stage.stats.invalid_reasons
    assert "pwned" not in reason and "\x1b" not in reason


def test_resource_ids_are_content_hashes():
    genuine = resource_record(RESOURCE)
    texts = genuine.values["attributes"].encode(), genuine.values["schema_url"].encode()
    assert genuine.values["resource_id"] == hash_resource(*texts)


def _metric_record(rid: int) -> TraceRecord:
    point = NumberDataPoint({"k": "v"}, 1, 2, 7, [])
    item = PointItem(RESOURCE, None, "n", "d", "ms", point, mv.KIND_SUM, 2, True)
    payload, _ = encode_point(item, rid, FTRACE_MAX_PAYLOAD)
    values = METRIC_NUMBER.unpack(record(1, payload), format_of(METRIC_NUMBER, "otel_metric_sum"))
    return TraceRecord(0, "metric_sum", "otel_metric_sum", 1, values)


def test_checked_records_carry_what_the_join_reads():
    """Resource id, the writer's truncated bits and where the record came from: nothing
    past the boundary reads a raw value."""
    rid = _rid()
    cut = span_record(make_spans()[0], rid)
    cut = cut._replace(values={**cut.values, "truncated": flags.TRUNCATED_ATTRIBUTES})
    decoded = [cut, log_record(make_logs()[0], rid), _metric_record(rid)]
    checker = RecordChecker()
    for n, good in enumerate(decoded):
        got = good._replace(timestamp=1000 + n, pid=77 + n, tracepoint=f"app_{good.kind}.{n}")
        checked = checker.check(got)
        assert (checked.resource_id, checked.truncated) == (rid, got.values["truncated"])
        assert (checked.timestamp, checked.pid, checked.tracepoint) == (
            got.timestamp,
            got.pid,
            got.tracepoint,
        )
    assert checker.check(cut).truncated == flags.TRUNCATED_ATTRIBUTES != 0
    resource = checker.check(resource_record(RESOURCE)._replace(pid=99))
    assert isinstance(resource, CheckedResource) and resource.pid == 99
    with pytest.raises(InvalidRecord, match="^nothing: not a kind the reader rebuilds$"):
        checker.check(cut._replace(kind="nothing"))


def test_checked_fields_by_name():
    """The checker builds its records positionally (by keyword costs 0.5 µs a record):
    each field, given a value of its own, lands under its own name."""
    checker = RecordChecker()
    log = {
        "time_ns": 101,
        "observed_time_ns": 102,
        "trace_id": f"{103:032x}",
        "span_id": f"{104:016x}",
        "trace_flags": 105,
        "severity_number": 9,
        "flags": flags.LOG_SEVERITY_TEXT | flags.LOG_EVENT_NAME,
        "severity_text": "sev",
        "event_name": "evt",
        "body": anyvalue.encode("body"),
        "attributes": anyvalue.encode({"a": "b"}),
        "dropped_attributes": 106,
        "scope": "{}",
        "resource_id": 107,
        "truncated": 108,
    }
    checked = checker.check(TraceRecord(109, "log", "app_log.0", 110, log))
    assert checked._asdict() == {
        "time_ns": 101,
        "observed_time_ns": 102,
        "trace_id": 103,
        "span_id": 104,
        "trace_flags": 105,
        "severity_number": 9,
        "severity_text": "sev",
        "event_name": "evt",
        "body": "body",
        "attributes": {"a": "b"},
        "dropped_attributes": 106,
        "scope_text": "{}",
        "scope": None,
        "resource_id": 107,
        "truncated": 108,
        "timestamp": 109,
        "pid": 110,
        "tracepoint": "app_log.0",
    }
    span = {
        "trace_id": f"{201:032x}",
        "span_id": f"{202:016x}",
        "parent_flags": flags.PARENT_PRESENT | flags.PARENT_REMOTE,
        "parent_span_id": f"{203:016x}",
        "trace_flags": 204,
        "trace_state": "k=v",
        "name": "nm",
        "kind": 2,
        "status_code": 1,
        "status_description": "desc",
        "start_time_ns": 205,
        "end_time_ns": 206,
        "attributes": anyvalue.encode({"a": "b"}),
        "dropped_attributes": 207,
        "events": "[]",
        "dropped_events": 208,
        "links": "[]",
        "dropped_links": 209,
        "scope": "{}",
        "resource_id": 210,
        "truncated": flags.TRUNCATED_ATTRIBUTES,
    }
    checked = checker.check(TraceRecord(212, "span", "app_span.0", 213, span))
    assert checked._asdict() == {
        "trace_id": 201,
        "span_id": 202,
        "parent_span_id": 203,
        "parent_is_remote": True,
        "trace_flags": 204,
        "trace_state": (("k", "v"),),
        "name": "nm",
        "kind": 2,
        "status_code": 1,
        "status_description": "desc",
        "start_time_ns": 205,
        "end_time_ns": 206,
        "attributes": {"a": "b"},
        "dropped_attributes": 207,
        "events": [],
        "dropped_events": 208,
        "links": [],
        "dropped_links": 209,
        "scope_text": "{}",
        "scope": None,
        "resource_id": 210,
        "truncated": flags.TRUNCATED_ATTRIBUTES,
        "timestamp": 212,
        "pid": 213,
        "tracepoint": "app_span.0",
    }
    metric = _metric_record(307)
    values = {
        **metric.values,
        "start_time_ns": 301,
        "time_ns": 302,
        "dropped_attributes": 304,
        "dropped_exemplars": 305,
        "truncated": 306,
    }
    checked = checker.check(metric._replace(timestamp=308, pid=309, values=values))
    assert checked._asdict() == {
        "kind": mv.KIND_SUM,
        "name": "n",
        "description": "d",
        "unit": "ms",
        "temporality": 2,
        "monotonic": True,
        "start_time_ns": 301,
        "time_ns": 302,
        "attributes": {"k": "v"},
        "exemplars": [],
        "value": 7,
        "measurements": 0,
        "sum": 0.0,
        "min": 0.0,
        "max": 0.0,
        "bounds": [],
        "counts": [],
        "scale": 0,
        "zero_count": 0,
        "positive": (0, []),
        "negative": (0, []),
        "histogram_flags": 0,
        "dropped_attributes": 304,
        "dropped_exemplars": 305,
        "truncated": 306,
        "scope_text": values["scope"],
        "scope": None,
        "resource_id": 307,
        "timestamp": 308,
        "pid": 309,
        "tracepoint": "otel_metric_sum",
    }
