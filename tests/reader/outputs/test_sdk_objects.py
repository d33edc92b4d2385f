# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Joined records built into ReadableSpan and ReadableLogRecord at the output
(outputs/sdk_objects.py); the join builds none."""

from __future__ import annotations

import ast
import io
from pathlib import Path

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.trace import ReadableSpan

from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord
from opentelemetry_exporter_userevents.reader.decode.validation import RecordChecker
from opentelemetry_exporter_userevents.reader.join import join_stage as join_module
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.join.joined_record import JoinedRecord
from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_objects import (
    readable_log,
    readable_span,
    sdk_object,
    sdk_objects,
)
from opentelemetry_exporter_userevents.reader.outputs.exporters.tree_view import TreeView
from opentelemetry_exporter_userevents.reader.outputs.output import TreeOutput
from opentelemetry_exporter_userevents.reader.pipeline.worker_loop import check_and_encode
from tests.reader.join.test_join_stage import (
    _rid,
    check_same_log,
    check_same_span,
    log_record,
    resource_record,
    span_record,
)
from tests.support.span_fixtures import RESOURCE, make_logs, make_spans


def test_spans_come_back_equal_field_by_field():
    spans = make_spans()
    join_stage = JoinStage()

    joined = join_stage.add([resource_record(RESOURCE)] + [span_record(s, _rid()) for s in spans])

    assert [type(item) for item in joined] == [JoinedRecord] * 2
    rebuilt = [sdk_object(item) for item in joined]
    assert len(rebuilt) == len(spans) == 2
    for got, want in zip(rebuilt, spans, strict=True):
        assert type(got) is ReadableSpan
        check_same_span(got, want)
    assert join_stage.stats.spans == 2 and join_stage.stats.resources == 1
    assert type(rebuilt[1].attributes["list"]) is tuple
    for item, got in zip(joined, rebuilt, strict=True):  # the join's objects, not copies
        assert got.resource is item.resource and got.instrumentation_scope is item.scope
        check_same_span(readable_span(*item), got)  # type: ignore[arg-type]


def test_logs_come_back_equal_field_by_field():
    logs = make_logs()
    join_stage = JoinStage()

    joined = join_stage.add([resource_record(RESOURCE)] + [log_record(r, _rid()) for r in logs])

    assert len(joined) == 25 and {type(item) for item in joined} == {JoinedRecord}
    for item, want in zip(joined, logs, strict=True):
        got = sdk_object(item)
        assert type(got) is ReadableLogRecord
        check_same_log(got, want)
        check_same_log(readable_log(*item), want)  # type: ignore[arg-type]
    assert join_stage.stats.logs == 25


def test_one_scope_object_per_distinct_scope():
    spans = make_spans()
    records = [resource_record(RESOURCE)] + [span_record(s, _rid()) for s in spans * 3]
    built, failed = sdk_objects(JoinStage().add(records))
    assert failed == 0 and len(built) == 6
    scopes = {id(span.instrumentation_scope) for span in built}  # type: ignore[union-attr]
    assert len(scopes) == len({span.instrumentation_scope for span in spans})


def test_the_join_builds_no_sdk_object():
    """The JoinStage hands JoinedRecord; join/ imports no span or log SDK type."""
    assert not hasattr(JoinStage, "span") and not hasattr(JoinStage, "log")
    join = Path(join_module.__file__).parent
    for path in join.glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
        assert not imported & {"opentelemetry.sdk.trace", "opentelemetry.sdk._logs"}, path
        assert not any(name.endswith(".outputs") or ".outputs." in name for name in imported)


def test_a_workers_record_builds_no_sdk_object_and_is_counted():
    spans = make_spans()
    decoded = [resource_record(RESOURCE)] + [span_record(s, _rid()) for s in spans]
    encoded = check_and_encode(decoded, RecordChecker())
    joined = JoinStage().add(encoded)
    assert [type(item.checked) for item in joined] == [EncodedRecord] * 2  # type: ignore[union-attr]
    built, failed = sdk_objects(joined)
    assert built == [] and failed == 2
    tree = TreeOutput(io.StringIO())
    tree.write(joined)
    assert tree.failed == 2


def test_the_tree_output_writes_what_the_tree_view_writes_of_the_sdk_objects():
    spans, logs = make_spans(), make_logs()
    records = (
        [resource_record(RESOURCE)]
        + [span_record(s, _rid()) for s in spans]
        + [log_record(r, _rid()) for r in logs]
    )
    joined = JoinStage().add(records)
    by_output, by_view = io.StringIO(), io.StringIO()
    output = TreeOutput(by_output)
    output.write(joined)
    output.close()
    view = TreeView(by_view)
    view.add([sdk_object(item) for item in joined])  # type: ignore[arg-type]
    view.flush()
    assert output.failed == 0
    assert by_output.getvalue() == by_view.getvalue() != ""
