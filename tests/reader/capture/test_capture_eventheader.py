# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``decode`` of trace.dat and perf.data captures holding EventHeader tracepoints (the
Rust, C++ and .NET exporters') beside ours: Common Schema spans and logs, and any other
EventHeader event as a log of its fields, rebuilt through the same boundary, join and
outputs as our records; bad records skipped and counted by reason and writer pid."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.capture.decode import decode_bytes
from opentelemetry_exporter_userevents.reader.commands import capture as capture_command
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    TRUNCATED_HEADER,
    UNKNOWN_FLAGS,
)
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.pipeline import decode_stage
from tests.reader.capture.test_capture import FORMATS, _capture, _pages, _records
from tests.reader.decode.eventheader_encoder import E, F
from tests.support.captures import perf_data, perf_sample
from tests.support.eventheader_captures import (
    END_NS,
    LOG_TIME_NS,
    PARENT,
    SPAN,
    START_NS,
    TRACE,
    dotnet_log,
    eventheader_format,
    eventheader_record,
    num,
    plain_event,
    rust_span,
    s8,
    struct,
)

RUST_ID, DOTNET_ID, PLAIN_ID = 401, 402, 403
EH_FORMATS = [
    ("user_events", eventheader_format("RustProvider_L4K1", RUST_ID)),
    ("user_events", eventheader_format("MicrosoftOpenTelemetryLogs_L4K1", DOTNET_ID)),
    ("user_events", eventheader_format("MyProvider_L5K1", PLAIN_ID)),
]
BAD_PID, BAD_CS_PID = 666, 777


def _eventheader_records() -> list[bytes]:
    """A Rust span, a .NET log, a plain event; then three bad records."""
    good = [
        eventheader_record(RUST_ID, "Span", rust_span()),
        eventheader_record(DOTNET_ID, "Log", dotnet_log()),
        eventheader_record(PLAIN_ID, "MyEvent", plain_event(), level=5),
    ]
    whole = eventheader_record(RUST_ID, "Span", rust_span(), pid=BAD_PID)
    flags = bytearray(whole)
    flags[8] |= 0x80  # a header flag nobody defined
    no_time = rust_span()
    no_time[1] = struct("PartA", s8("ext_dt_traceId", TRACE), s8("ext_dt_spanId", SPAN))
    bad = [
        whole[:12],  # cut inside the event header
        bytes(flags),
        eventheader_record(RUST_ID, "Span", no_time, pid=BAD_CS_PID),
    ]
    return good + bad


def _trace_dat(tmp_path: Any, raws: list[bytes] | None = None) -> str:
    """Our records (the fixtures', random ids) and the EventHeader ones, in a trace.dat."""
    if raws is None:
        raws = _records()[2] + _eventheader_records()
    return _capture(tmp_path, _pages(raws), FORMATS + EH_FORMATS)


def _decode(path: str, *flags: str) -> tuple[list[dict[str, Any]], str, int]:
    out, err = io.StringIO(), io.StringIO()
    args = cli.parser().parse_args(["decode", path, *flags])
    status = capture_command.decode(args, out, err)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return lines, re.sub(r" in [0-9.]+ s", "", err.getvalue()), status


def _items(lines: list[dict[str, Any]], kind: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(resource attributes, item) of each span or log, in a stable order."""
    keys = {"spans": ("resourceSpans", "scopeSpans", "spans"),
            "logs": ("resourceLogs", "scopeLogs", "logRecords")}[kind]  # fmt: skip
    found = []
    for line in lines:
        for resource in line.get(keys[0], ()):
            attributes = _attributes(resource["resource"].get("attributes", []))
            for scope in resource.get(keys[1], ()):
                for item in scope.get(keys[2], ()):
                    found.append((attributes, item))
    return sorted(found, key=lambda pair: json.dumps(pair, sort_keys=True))


def _attributes(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    return {pair["key"]: next(iter(pair["value"].values())) for pair in pairs}


def _eventheader_only(items: list[tuple[dict[str, Any], dict[str, Any]]]) -> list:
    return [(r, i) for r, i in items if i.get("traceId") == TRACE or "eventName" in i]


def test_decode_rebuilds_eventheader_spans_and_logs_beside_ours(tmp_path):
    spans, logs, _ = _records()
    lines, summary, status = _decode(_trace_dat(tmp_path), "--workers", "1")

    assert status == 0
    got_spans = _eventheader_only(_items(lines, "spans"))
    assert len(got_spans) == 1
    resource, span = got_spans[0]
    assert resource == {"service.name": "cart", "service.instance.id": "pod-7"}
    assert span["name"] == "GET /users" and span["kind"] == 3  # client
    assert span["traceId"] == TRACE and span["spanId"] == SPAN
    assert span["parentSpanId"] == PARENT
    assert (span["startTimeUnixNano"], span["endTimeUnixNano"]) == (str(START_NS), str(END_NS))
    assert _attributes(span["attributes"]) == {"http.request.method": "GET", "user": "ann"}

    got_logs = {item["eventName"]: (r, item) for r, item in _items(lines, "logs")
                if "eventName" in item}  # fmt: skip
    resource, dotnet = got_logs["Orders.Shipping"]
    assert resource == {"service.name": "orders"}
    assert dotnet["body"] == {"stringValue": "order 7 shipped"}
    assert dotnet["severityNumber"] == 9 and dotnet["severityText"] == "Information"
    assert dotnet["timeUnixNano"] == str(LOG_TIME_NS)
    assert _attributes(dotnet["attributes"]) == {"orderId": "7"}  # OTLP/JSON: int64 as text
    resource, plain = got_logs["MyEvent"]
    assert resource == {}
    assert plain["severityNumber"] == 5  # level 5: verbose, DEBUG
    assert _attributes(plain["attributes"]) == {"count": "5", "where.x": "-1", "where.y": "z"}

    assert f"{len(spans) + 1} spans and {len(logs) + 2} logs rebuilt" in summary
    assert "cart (1)" in summary and "orders (1)" in summary
    assert "provider MyProvider (1)" in summary
    assert "3 invalid (" in summary
    assert f"{TRUNCATED_HEADER}: 1" in summary and f"{UNKNOWN_FLAGS}: 1" in summary
    assert "cs.PartA.time: missing: 1" in summary
    assert f"by writer pid {BAD_PID}: 2, {BAD_CS_PID}: 1)" in summary


def test_a_perf_data_of_the_same_records_decodes_to_the_same_output(tmp_path):
    raws = _records()[2] + _eventheader_records()
    samples = [perf_sample(raw, 1000 + 10 * n, cpu=n % 2) for n, raw in enumerate(raws)]
    path = tmp_path / "perf.data"
    path.write_bytes(perf_data(FORMATS + EH_FORMATS, samples))

    lines, summary, status = _decode(str(path))
    want_lines, want_summary, _ = _decode(_trace_dat(tmp_path, raws), "--workers", "1")
    assert status == 0 and "(perf.data)" in summary
    for kind in ("spans", "logs"):
        assert _items(lines, kind) == _items(want_lines, kind)
        assert _eventheader_only(_items(lines, kind))
    assert summary.split("): ", 1)[1] == want_summary.split("): ", 1)[1]


def test_decode_with_workers_gives_the_same_items_and_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(decode_stage, "WORKERS_FROM", 0)
    path = _trace_dat(tmp_path)
    one = _decode(path, "--workers", "1")
    two = _decode(path, "--workers", "2")
    for kind in ("spans", "logs"):
        assert _items(two[0], kind) == _items(one[0], kind)
        assert _eventheader_only(_items(two[0], kind))
    assert two[1] == one[1] and "3 invalid" in two[1]


def test_the_tree_view_and_an_exporter_show_eventheader_records(tmp_path, monkeypatch):
    path = _trace_dat(tmp_path, _eventheader_records())
    out = tmp_path / "tree.txt"
    assert cli.main(["decode", path, "--format", "tree", "-o", str(out)]) == 0
    tree = out.read_text()
    assert "GET /users" in tree and "order 7 shipped" in tree and "MyEvent" in tree

    spans: list[Any] = []
    logs: list[Any] = []
    monkeypatch.setattr(ConsoleSpanExporter, "export", lambda self, items: spans.extend(items))
    monkeypatch.setattr(ConsoleLogRecordExporter, "export", lambda self, items: logs.extend(items))
    assert cli.main(["decode", path, "--exporter", "console"]) == 0
    assert [span.name for span in spans] == ["GET /users"]
    assert spans[0].resource.attributes["service.name"] == "cart"
    names = sorted(json.loads(log.to_json())["event_name"] for log in logs)
    assert names == ["MyEvent", "Orders.Shipping"]


def test_decode_provider_reads_only_the_providers_given(tmp_path):
    lines, summary, status = _decode(_trace_dat(tmp_path), "--provider", "MyProvider")
    names = [item.get("eventName") for _, item in _items(lines, "logs")]
    assert status == 0 and "MyEvent" in names and "Orders.Shipping" not in names
    assert not _eventheader_only(_items(lines, "spans"))
    # the Rust span, the .NET log, and the three bad records (all RustProvider's)
    assert "5 records of other prefixes or providers skipped" in summary
    assert "invalid" not in summary


def test_a_provider_must_be_one_an_eventheader_name_can_have(capsys):
    for bad in ("", "has space", "a:b", "x;y", "ü", "p" * 201):
        with pytest.raises(SystemExit):
            cli.parser().parse_args(["decode", "f", "--provider", bad])
    args = cli.parser().parse_args(["record", "--provider", "My_Provider1", "--provider", "*"])
    assert args.providers == ["My_Provider1", "*"]


def test_an_eventheader_name_without_its_header_field_is_not_taken(tmp_path):
    """A tracepoint named like EventHeader's whose format does not start with
    ``eventheader_flags`` is not one: its records are not decoded as EventHeader."""
    text = eventheader_format("Fake_L4K1", 499).replace("eventheader_flags", "flags")
    raw = eventheader_record(499, "Span", rust_span())
    capture = _capture(tmp_path, [(0, _pages([raw])[0][1])], [("user_events", text)])
    decoded = decode_bytes(open(capture, "rb").read(), ["*"])
    assert decoded.tracepoints == [] and list(decoded.records) == []
    assert decoded.decoder.stats.undecodable == 1


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_eventheader_records_are_counted_never_raised(tmp_path_factory, data):
    """Bytes flipped or cut anywhere in an event: each record is rebuilt or counted
    invalid (by a reason of the fixed vocabularies), and nothing raises."""
    raws = []
    for raw in _eventheader_records()[:3]:
        raw = bytearray(raw)
        for _ in range(data.draw(st.integers(0, 3))):
            raw[data.draw(st.integers(8, len(raw) - 1))] = data.draw(st.integers(0, 255))
        raws.append(bytes(raw[: data.draw(st.integers(8, len(raw)))]))
    path = _capture(tmp_path_factory.mktemp("c"), _pages(raws), EH_FORMATS)
    decoded = decode_bytes(open(path, "rb").read(), ["*"])
    join_stage = JoinStage(resource_wait=float("inf"))
    rebuilt = join_stage.add(list(decoded.records)) + join_stage.flush()
    stats = join_stage.stats
    assert len(rebuilt) + stats.invalid == len(raws)
    assert stats.without_resource == 0  # an EventHeader record brings its resource
    for reason in stats.invalid_reasons:
        assert reason.startswith(("eventheader: ", "cs.")), reason


def test_an_integer_otlp_cannot_hold_is_dropped_and_counted_not_refused(tmp_path):
    specs = [num("big", E.VALUE64, 1 << 63, F.UNSIGNED_INT), num("ok", E.VALUE8, 1)]
    raw = eventheader_record(PLAIN_ID, "Big", specs, level=5)
    lines, summary, status = _decode(_capture(tmp_path, _pages([raw]), EH_FORMATS))
    ((_, item),) = _items(lines, "logs")
    assert status == 0 and _attributes(item["attributes"]) == {"ok": "1"}
    assert item["droppedAttributesCount"] == 1
