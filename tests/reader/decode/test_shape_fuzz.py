# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Fuzzing at the shape level: a genuine record (the exporters' encoding of what an app
handed to the SDK) with ONE field replaced by well-formed text of a wrong shape
(tests/support/shape_strategies.py), between two genuine records of the same app.

For each: nothing raises; the hostile record is rebuilt (when the wrong shape happens to be
acceptable) or counted once, under its writer's pid, with a reason from the fixed
vocabulary that names its kind and field; both genuine records come out exactly as the
app's SDK objects encode to OTLP; and no terminal escape or line break reaches a line of
the tree view. Then the same through ``otel-userevents decode`` of a trace.dat, and the
join_stage's tables stay bounded whatever ids records carry."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.capture import TraceDatWriter
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.join import join_stage as join_module
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json
from opentelemetry_exporter_userevents.reader.outputs.output import OtlpJsonOutput, TreeOutput
from opentelemetry_exporter_userevents.record.resource_id import hash_resource
from opentelemetry_exporter_userevents.record.tracepoints import METRIC_KINDS
from tests.support.captures import HEADER_EVENT, format_text
from tests.support.otlp import flatten, metric_points
from tests.support.pages import HEADER_PAGE, data_event, page, record
from tests.support.sdk_rebuild import SdkRebuilder
from tests.support.shape_strategies import (
    APP_PID,
    GENUINE,
    HOSTILE_PID,
    RESOURCE_PAYLOAD,
    SCHEMAS,
    TRACEPOINTS,
    Hostile,
    as_metric_point,
    hostile_records,
    repack,
    trace_record,
    unpack,
)

SETTINGS = settings(max_examples=700, deadline=None, suppress_health_check=list(HealthCheck))
CLI_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
NOT_RESOURCE = tuple(kind for kind in TRACEPOINTS if kind != "resource")
VOCABULARY = {
    "not a JSON object",
    "not a JSON list",
    "not a string",
    "not an integer",
    "out of range",
    "not a number",
    "not lowercase hex of the right length",
    "not in the value encoding",
    "not a plain text",
    "not a boolean",
    "an invalid (all-zero) id",
    "not a W3C tracestate",
    "not the hash of the resource's texts",
}
_REASON = re.compile(r"(?P<kind>[a-z_]+)(?:\.[a-z_]+(?:\[\])?)*: (?P<what>.+)")
UNSAFE = ("\x1b", "\x9b", "\u202e")
"""ESC, C1 CSI and RIGHT-TO-LEFT OVERRIDE: no output line may carry them raw."""


# --- what the app's SDK objects encode to -----------------------------------------------


def _otlp(kind: str, items: list) -> dict:
    if kind == "span":
        return otlp_json.spans_request(items)
    if kind == "log":
        return otlp_json.logs_request(items)
    return otlp_json.metrics_request(items)


def _originals(kind: str) -> list:
    originals = GENUINE[kind].originals
    return [as_metric_point(o) for o in originals] if kind in METRIC_KINDS else originals


def _same_as_the_app(kind: str, rebuilt: object, original: object) -> None:
    got, expected = _otlp(kind, [rebuilt]), _otlp(kind, [original])
    assert got == expected, (json.dumps(got)[:2000], json.dumps(expected)[:2000])


def _check_otlp_lines(kind: str, lines: list[str]) -> None:
    """The genuine items, whatever else the output carries, exactly as the app's."""
    requests = [json.loads(line) for line in lines]
    first, second = _originals(kind)[:2]
    expected_request = _otlp(kind, [first, second])
    if kind in METRIC_KINDS:
        got = metric_points(requests)
        for key, points in metric_points([expected_request]).items():
            assert got[key][0] == points[0] and got[key][-1] == points[-1]
        return
    plural = "spans" if kind == "span" else "logs"
    got = flatten(requests, plural)
    for key, text in flatten([expected_request], plural).items():
        assert got.get(key) == text


def _check_tree(text: str, lines: int) -> None:
    for char in UNSAFE:
        assert char not in text, (char, text)
    assert text.count("\n") == len(text.splitlines()) == lines, text


def _tree_lines(items: list, traces_printed: int) -> int:
    """Lines the tree view writes for ``items``: a line per log, metric point, span and
    span event, and one per trace printed."""
    lines = traces_printed
    for item in items:
        lines += 1 + len(getattr(item, "events", ()))
    return lines


def _tree(items: list) -> tuple[str, int]:
    out = io.StringIO()
    tree = TreeOutput(out)
    printed = []
    print_trace = tree.view._print_trace

    def counting(spans):
        printed.append(len(spans))
        print_trace(spans)

    tree.view._print_trace = counting  # type: ignore[method-assign]
    tree.write(items)
    tree.close()
    return out.getvalue(), _tree_lines(items, len(printed))


# --- the batch: the app's resource, genuine, hostile, genuine -------------------------------


def _batch(hostile: Hostile, genuine_kind: str) -> list[TraceRecord]:
    payloads = GENUINE[genuine_kind].payloads
    return [
        trace_record("resource", unpack("resource", RESOURCE_PAYLOAD), APP_PID),
        trace_record(genuine_kind, unpack(genuine_kind, payloads[0]), APP_PID),
        trace_record(hostile.kind, hostile.values, HOSTILE_PID),
        trace_record(genuine_kind, unpack(genuine_kind, payloads[1]), APP_PID),
    ]


def _check_counted(join_stage: JoinStage, hostile: Hostile) -> None:
    stats = join_stage.stats
    assert stats.invalid == 1
    ((reason, count),) = stats.invalid_reasons.items()
    assert count == 1
    assert hostile.allowed(reason), (reason, hostile.where)
    match = _REASON.fullmatch(reason)
    assert match is not None and match["kind"] == hostile.record_kind, reason
    assert match["what"] in VOCABULARY, reason  # a fixed vocabulary: no hostile text
    assert stats.invalid_pids == {HOSTILE_PID: 1} and stats.invalid_other_pids == 0


@SETTINGS
@given(hostile=hostile_records(), genuine_kind=st.sampled_from(NOT_RESOURCE))
def test_one_field_of_a_wrong_shape_is_counted_or_rebuilt_and_hurts_no_other_record(
    hostile, genuine_kind
):
    if hostile.kind != "resource":
        genuine_kind = hostile.kind
    join_stage = SdkRebuilder(resource_wait=float("inf"))

    ready = join_stage.add(_batch(hostile, genuine_kind)) + join_stage.flush()

    stats = join_stage.stats
    assert stats.without_resource == 0 and join_stage.pending == 0
    if hostile.kind == "resource":
        assert len(ready) == 2
        assert stats.resources + stats.invalid == 2 and stats.resources >= 1
    else:
        assert len(ready) + stats.invalid == 3 and stats.resources == 1
    if stats.invalid:
        _check_counted(join_stage, hostile)
    else:
        assert stats.invalid_pids == {} and stats.invalid_reasons == {}
    first, second = _originals(genuine_kind)[:2]
    _same_as_the_app(genuine_kind, ready[0], first)
    _same_as_the_app(genuine_kind, ready[-1], second)

    otlp = OtlpJsonOutput(io.StringIO())
    otlp.write(ready)
    lines = otlp.out.getvalue().splitlines()
    assert otlp.failed <= len(ready) - 2
    _check_otlp_lines(genuine_kind, lines)

    text, expected_lines = _tree(ready)
    _check_tree(text, expected_lines)


# --- the same through `otel-userevents decode` of a trace.dat -------------------------------

EVENT_IDS = {kind: 400 + n for n, kind in enumerate(TRACEPOINTS)}
FORMATS = [
    ("user_events_multi", format_text(SCHEMAS[kind], name, EVENT_IDS[kind]))
    for kind, name in TRACEPOINTS.items()
]


def _capture(path: Path, records: list[tuple[str, bytes, int]]) -> None:
    writer = TraceDatWriter(str(path), 4096, HEADER_PAGE, HEADER_EVENT)
    for n, (kind, payload, pid) in enumerate(records):
        raw = record(EVENT_IDS[kind], payload, pid)
        writer.add_page(0, page(1000 + 10 * n, [data_event(0, raw)]))
    for system, text in FORMATS:
        writer.add_format(system, text)
    writer.close("42 app\n666 hostile\n")


@CLI_SETTINGS
@given(hostile=hostile_records(), genuine_kind=st.sampled_from(NOT_RESOURCE))
def test_cli_decode_of_a_capture_with_one_wrong_field_writes_the_genuine_records(
    hostile, genuine_kind, capsys
):
    if hostile.kind != "resource":
        genuine_kind = hostile.kind
    hostile_payload = repack(hostile.kind, hostile.values)
    payloads = GENUINE[genuine_kind].payloads
    records = [("resource", RESOURCE_PAYLOAD, APP_PID), (genuine_kind, payloads[0], APP_PID)]
    if hostile_payload is not None:  # else no kernel would take it from a writer
        records.append((hostile.kind, hostile_payload, HOSTILE_PID))
    records.append((genuine_kind, payloads[1], APP_PID))
    capsys.readouterr()
    with tempfile.TemporaryDirectory() as directory:
        capture, out, tree = (Path(directory) / name for name in ("c.dat", "o.json", "t.txt"))
        _capture(capture, records)

        assert cli.main(["decode", str(capture), "-o", str(out)]) == 0
        assert cli.main(["decode", str(capture), "--format", "tree", "-o", str(tree)]) == 0

        _check_otlp_lines(genuine_kind, out.read_text().splitlines())
        text = tree.read_text()
    for char in UNSAFE:
        assert char not in text
        assert char not in capsys.readouterr().err
    assert text.count("\n") == len(text.splitlines())


# --- known bugs -------------------------------------------------------------------------


def test_an_all_zero_span_id_is_counted_under_span_id():
    values = unpack("span", GENUINE["span"].payloads[2])
    values["span_id"] = "0" * 16
    join_stage = SdkRebuilder()

    join_stage.add([trace_record("span", values, HOSTILE_PID)])

    ((reason, _),) = join_stage.stats.invalid_reasons.items()
    assert reason.startswith("span.span_id"), reason


def test_no_raw_escape_reaches_stderr_when_otlp_cannot_carry_an_attribute():
    values = unpack("span", GENUINE["span"].payloads[2])
    values["attributes"] = '{"\\u001b]0;pwned\\u0007\\u001b[2J":"\\ud800"}'
    payload = repack("span", values)
    assert payload is not None
    with tempfile.TemporaryDirectory() as directory:
        capture = Path(directory) / "c.dat"
        _capture(capture, [("resource", RESOURCE_PAYLOAD, APP_PID), ("span", payload, 666)])
        done = subprocess.run(
            [sys.executable, "-m", cli.__name__, "decode", str(capture), "-o",
             str(Path(directory) / "o.json")],
            capture_output=True,
            check=True,
        )  # fmt: skip
    assert b"1 spans and 0 logs rebuilt" in done.stderr
    assert b"\x1b" not in done.stderr, done.stderr[:200]


@pytest.mark.parametrize("attributes", ["[]", "0", '""', "false"])
def test_scope_attributes_of_a_falsy_wrong_shape_are_counted(attributes):
    values = unpack("span", GENUINE["span"].payloads[2])
    values["scope"] = (
        '{"name":"s","version":null,"schema_url":null,"attributes":' + attributes + "}"
    )
    join_stage = SdkRebuilder()

    join_stage.add([trace_record("span", values, HOSTILE_PID)])

    assert join_stage.stats.invalid_reasons == {"span.scope.attributes: not a JSON object": 1}


def test_a_resource_record_with_a_known_id_and_other_texts_is_counted():
    genuine = unpack("resource", RESOURCE_PAYLOAD)
    forged = dict(genuine, attributes='{"service.name":"forged"}')
    join_stage = SdkRebuilder()

    join_stage.add([trace_record("resource", genuine, APP_PID)])
    join_stage.add([trace_record("resource", forged, HOSTILE_PID)])

    assert join_stage.stats.invalid_pids == {HOSTILE_PID: 1}
    assert join_stage.stats.resources == 1
    assert join_stage._resources[genuine["resource_id"]].attributes["service.name"] == "shape-svc"


# --- bounded memory ---------------------------------------------------------------------


def _span_values(resource_id: int) -> dict:
    return dict(unpack("span", GENUINE["span"].payloads[0]), resource_id=resource_id)


def _log_records(ids: range, resource_id) -> list[TraceRecord]:
    """Small genuine log records (the cheapest kind to rebuild), one per id in ``ids``."""
    template = dict(unpack("log", GENUINE["log"].payloads[1]), attributes="{}", body='"x"')
    tracepoint = TRACEPOINTS["log"]
    return [
        TraceRecord(n, "log", tracepoint, APP_PID, dict(template, resource_id=resource_id(n)))
        for n in ids
    ]


def test_records_of_never_announced_resources_keep_the_wait_table_bounded(monkeypatch):
    monkeypatch.setattr(join_module, "MAX_PENDING_RESOURCES", 512)
    monkeypatch.setattr(join_module, "MAX_PENDING_RECORDS", 20_000)
    join_stage = SdkRebuilder(resource_wait=float("inf"))
    total, rebuilt = 100_000, 0

    for start in range(0, total, 5_000):
        batch = _log_records(range(start, start + 5_000), lambda n: n + 1)
        rebuilt += len(join_stage.add(batch))
        assert len(join_stage._pending) <= join_module.MAX_PENDING_RESOURCES
        assert join_stage.pending <= join_module.MAX_PENDING_RECORDS

    stats = join_stage.stats
    assert stats.pending_evicted == rebuilt == total - join_stage.pending
    assert join_stage.pending == join_module.MAX_PENDING_RESOURCES
    rebuilt += len(join_stage.flush())
    assert rebuilt == stats.logs == stats.without_resource == total
    assert join_stage.pending == 0 and not join_stage._pending and stats.invalid == 0


def test_many_records_of_a_few_unknown_resources_keep_the_wait_bounded(monkeypatch):
    monkeypatch.setattr(join_module, "MAX_PENDING_RECORDS", 1_000)
    join_stage = SdkRebuilder(resource_wait=float("inf"))
    total, rebuilt = 20_000, 0

    for start in range(0, total, 2_000):
        rebuilt += len(join_stage.add(_log_records(range(start, start + 2_000), lambda n: n % 7)))
        assert join_stage.pending <= join_module.MAX_PENDING_RECORDS
        assert sum(map(len, join_stage._pending.values())) == join_stage.pending

    assert join_stage.stats.pending_evicted == rebuilt == total - join_stage.pending
    rebuilt += len(join_stage.flush())
    assert rebuilt == join_stage.stats.without_resource == total


def test_many_valid_resource_announcements_keep_the_resource_table_bounded():
    join_stage = SdkRebuilder()
    total = 10_000
    batch = []
    for n in range(total):
        attributes, url = f'{{"service.name":"s{n}"}}'.encode(), b""
        values = {"resource_id": hash_resource(attributes, url), "interval_ms": 1000,
                  "attributes": attributes.decode(), "schema_url": ""}  # fmt: skip
        batch.append(TraceRecord(n, "resource", TRACEPOINTS["resource"], n, values))

    assert join_stage.add(batch) == []

    stats = join_stage.stats
    assert len(join_stage._resources) == join_module.MAX_RESOURCES
    assert stats.resources == total and stats.invalid == 0
    assert stats.resources_evicted == total - join_module.MAX_RESOURCES
    # The newest are kept: a record of the last resource is rebuilt with it at once.
    last = batch[-1].values["resource_id"]
    (span,) = join_stage.add([TraceRecord(0, "span", TRACEPOINTS["span"], 1, _span_values(last))])
    assert span.resource.attributes["service.name"] == f"s{total - 1}"
    assert isinstance(span, object) and not isinstance(span, MetricPoint)
