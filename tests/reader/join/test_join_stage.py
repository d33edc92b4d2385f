# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Records joined to their resources and scopes, and what the outputs make of them."""

from __future__ import annotations

import io
import json

from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents._export.log_encoder import encode_log
from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord, RejectedRecord
from opentelemetry_exporter_userevents.reader.decode.validation import RecordChecker
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json
from opentelemetry_exporter_userevents.reader.outputs.exporters.tree_view import TreeView
from opentelemetry_exporter_userevents.reader.outputs.output import OtlpJsonOutput
from opentelemetry_exporter_userevents.reader.pipeline.worker_loop import check_and_encode
from opentelemetry_exporter_userevents.record import anyvalue, flags, schema
from opentelemetry_exporter_userevents.record.resource_id import hash_resource
from tests.support.pages import record
from tests.support.records import format_of, plain, same
from tests.support.sdk_rebuild import SdkRebuilder
from tests.support.span_fixtures import RESOURCE, make_logs, make_spans

SPAN_FORMAT = format_of(schema.SPAN, "otel_span.0")
LOG_FORMAT = format_of(schema.LOG, "otel_log_info.0")
RESOURCE_FORMAT = format_of(schema.RESOURCE, "otel_resource.0")


def span_record(span, rid=1) -> TraceRecord:
    payload, _ = encode_span(span, rid, FTRACE_MAX_PAYLOAD)
    return TraceRecord(
        0, "span", "otel_span.0", 1, schema.SPAN.unpack(record(1, payload), SPAN_FORMAT)
    )


def log_record(readable, rid=1) -> TraceRecord:
    payload, _ = encode_log(readable, rid, FTRACE_MAX_PAYLOAD)
    values = schema.LOG.unpack(record(1, payload), LOG_FORMAT)
    return TraceRecord(0, "log", "otel_log_info.0", 1, values)


def resource_record(resource: Resource) -> TraceRecord:
    attributes = anyvalue.encode(dict(resource.attributes)).encode()
    url = resource.schema_url.encode()
    rid = hash_resource(attributes, url)
    payload = schema.RESOURCE.pack((rid, 1000), (attributes, url))
    values = schema.RESOURCE.unpack(record(1, payload), RESOURCE_FORMAT)
    return TraceRecord(0, "resource", "otel_resource.0", 1, values)


def attributes_equal(a, b) -> bool:
    return same(dict(a or {}), dict(b or {})) and getattr(a, "dropped", 0) == getattr(
        b, "dropped", 0
    )


def check_same_span(got, want) -> None:
    """Every ReadableSpan property, with types (tuples stay tuples)."""
    assert got.name == want.name and got.kind == want.kind
    assert got.context == want.context
    assert got.context.trace_state == want.context.trace_state
    assert got.context.trace_flags == want.context.trace_flags
    assert (got.parent is None) == (want.parent is None)
    if want.parent is not None:
        assert got.parent.span_id == want.parent.span_id
        assert got.parent.trace_id == want.parent.trace_id
        assert got.parent.is_remote == want.parent.is_remote
    assert (got.start_time, got.end_time) == (want.start_time, want.end_time)
    assert got.status.status_code == want.status.status_code
    assert got.status.description == want.status.description
    assert attributes_equal(got.attributes, want.attributes)
    assert len(got.events) == len(want.events)
    for a, b in zip(got.events, want.events, strict=True):
        assert (a.name, a.timestamp, a.dropped_attributes) == (
            b.name,
            b.timestamp,
            b.dropped_attributes,
        )
        assert attributes_equal(a.attributes, b.attributes)
    assert len(got.links) == len(want.links)
    for a, b in zip(got.links, want.links, strict=True):
        assert a.context == b.context and a.context.trace_state == b.context.trace_state
        assert a.context.is_remote == b.context.is_remote
        assert a.context.trace_flags == b.context.trace_flags
        assert attributes_equal(a.attributes, b.attributes)
    assert (got.dropped_attributes, got.dropped_events, got.dropped_links) == (
        want.dropped_attributes,
        want.dropped_events,
        want.dropped_links,
    )
    assert got.instrumentation_scope == want.instrumentation_scope
    assert attributes_equal(
        got.instrumentation_scope.attributes, want.instrumentation_scope.attributes
    )
    assert got.resource == want.resource


def check_same_log(got, want) -> None:
    a, b = got.log_record, want.log_record
    for name in (
        "timestamp",
        "observed_timestamp",
        "trace_id",
        "span_id",
        "trace_flags",
        "severity_text",
        "severity_number",
        "event_name",
    ):
        assert getattr(a, name) == getattr(b, name), name
    assert same(_plain_body(a.body), _plain_body(b.body))
    assert attributes_equal(a.attributes, b.attributes)
    assert got.dropped_attributes == want.dropped_attributes
    assert got.instrumentation_scope == want.instrumentation_scope
    assert got.resource == want.resource


def _plain_body(body):
    return plain(body)


def _rid() -> int:
    return resource_record(RESOURCE).values["resource_id"]


def test_records_wait_for_their_resource_then_give_up_with_an_empty_one():
    spans = make_spans()
    join_stage = SdkRebuilder(resource_wait=3600)

    assert join_stage.add([span_record(spans[0], _rid())]) == []
    assert join_stage.pending == 1
    released = join_stage.add([resource_record(RESOURCE)])
    assert [s.name for s in released] == [spans[0].name] and released[0].resource == RESOURCE

    assert join_stage.add([span_record(spans[1], 999)]) == []
    (orphan,) = join_stage.flush()
    assert orphan.resource == Resource.get_empty()
    assert join_stage.stats.without_resource == 1 and join_stage.pending == 0

    impatient = SdkRebuilder(resource_wait=0)
    assert len(impatient.add([span_record(spans[1], 999)])) == 1


def test_truncated_and_invalid_records_are_counted():
    span = make_spans()[0]
    join_stage = SdkRebuilder()
    cut = span_record(span, _rid())
    cut.values["truncated"] = flags.TRUNCATED_EVENTS
    broken = span_record(span, _rid())
    broken.values["attributes"] = "{not json"

    rebuilt = join_stage.add([resource_record(RESOURCE), cut, broken])

    assert len(rebuilt) == 1
    assert (join_stage.stats.truncated, join_stage.stats.invalid) == (1, 1)


def test_otlp_json_of_rebuilt_telemetry_equals_the_originals():
    spans = make_spans()
    logs = [r for r in make_logs() if otlp_can_carry(r)]
    join_stage = SdkRebuilder()
    rebuilt = join_stage.add(
        [resource_record(RESOURCE)]
        + [span_record(s, _rid()) for s in spans]
        + [log_record(r, _rid()) for r in logs]
    )
    got_spans = otlp_json.spans_request(rebuilt[:2])
    got_logs = otlp_json.logs_request(rebuilt[2:])

    assert got_spans == otlp_json.spans_request(spans)
    assert got_logs == otlp_json.logs_request(logs)
    span = got_spans["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["traceId"] == f"{spans[0].context.trace_id:032x}"
    assert span["parentSpanId"] == f"{spans[0].parent.span_id:016x}"
    assert span["startTimeUnixNano"] == str(spans[0].start_time)
    assert json.loads(otlp_json.dumps(got_spans)) == got_spans


def test_otlp_json_leaves_out_and_counts_what_otlp_cannot_carry():
    logs = make_logs()
    refused = [r for r in logs if not otlp_can_carry(r)]  # 2**70 and lone surrogates

    request, skipped = otlp_json.skipping_unrepresentable(otlp_json.logs_request, logs)

    assert len(refused) == 4 and skipped == len(refused)
    kept = request["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    assert len(kept) == len(logs) - len(refused)


def otlp_can_carry(readable) -> bool:
    body = readable.log_record.body
    if isinstance(body, int) and body >= 2**63:
        return False
    return not (isinstance(body, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in body))


def test_tree_view_nests_children_under_their_parent():
    spans = make_spans()  # the child ends (and arrives) first
    rebuilt = SdkRebuilder().add(
        [resource_record(RESOURCE)] + [span_record(s, _rid()) for s in spans]
    )
    out = io.StringIO()
    view = TreeView(out)

    view.add(rebuilt[:1])
    assert out.getvalue() == ""  # waits for the root
    view.add(rebuilt[1:])

    lines = out.getvalue().splitlines()
    assert lines[0] == f"trace {spans[0].context.trace_id:032x}  checkout"
    assert lines[1].startswith("  GET /users/{id}  server  ") and "[UNSET]" in lines[1]
    assert "• cache miss" in lines[2]
    assert lines[3].startswith("  └─ SELECT users  client  ")
    assert "[ERROR: connection reset]" in lines[3]


def test_tree_view_prints_orphans_on_flush_and_logs_at_once():
    spans = make_spans()
    logs = make_logs()
    join_stage = SdkRebuilder()
    rebuilt = join_stage.add(
        [resource_record(RESOURCE), span_record(spans[0], _rid()), log_record(logs[0], _rid())]
    )
    out = io.StringIO()
    view = TreeView(out)

    view.add(rebuilt)
    assert out.getvalue().count("\n") == 1 and "checkout" in out.getvalue()
    view.flush()
    assert f"(parent {spans[0].parent.span_id:016x} not seen)" in out.getvalue()


def test_the_join_takes_a_workers_records_as_it_takes_checked_ones():
    """Records a worker checked and encoded (no raw value, no SDK object) wait for their
    resource, join it and its scope, and are counted exactly as the same records checked
    here; the output writes the same lines; a worker's verdict of invalid is counted by
    reason and writer pid."""
    resource = resource_record(RESOURCE)
    rid = resource.values["resource_id"]
    spans = [span_record(span, rid)._replace(pid=7) for span in make_spans()]
    logs = [log_record(log, rid)._replace(pid=8) for log in make_logs()]
    bad = spans[0]._replace(pid=9, values={**spans[0].values, "kind": 9})
    unknown = spans[1]._replace(values={**spans[1].values, "resource_id": rid + 1})
    decoded = [*spans, bad, unknown, *logs, resource]  # all but one wait for the resource
    encoded = check_and_encode(decoded, RecordChecker())
    assert {type(item) for item in encoded} == {EncodedRecord, RejectedRecord, TraceRecord}
    here, there = JoinStage(), JoinStage()
    lines = []
    for join_stage, records in ((here, decoded), (there, encoded)):
        out = io.StringIO()
        output = OtlpJsonOutput(out)
        output.write(join_stage.add(records) + join_stage.flush())
        lines.append(out.getvalue())
    assert lines[0] == lines[1] != ""
    assert here.stats == there.stats
    assert there.stats.spans == len(spans) + 1 and there.stats.logs == len(logs)
    assert there.stats.invalid_pids == {9: 1} and there.stats.without_resource == 1
