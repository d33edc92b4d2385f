# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``decode`` of trace.dat and perf.data captures holding the metric exporters'
``otlp_metrics`` tracepoint beside ours and EventHeader ones: each request's points come
out of every output (OTLP/JSON, tree, an exporter, workers) as the OTLP metrics they are,
with the request's resource and scope; a bad record is counted by reason and writer pid."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricsData, ResourceMetrics
from opentelemetry.sdk.metrics.export import ScopeMetrics as SdkScopeMetrics

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.outputs.exporters.otlp_json import (
    metrics_data_request,
)
from opentelemetry_exporter_userevents.reader.pipeline import decode_stage
from tests.reader.capture.test_capture import FORMATS, _capture, _pages, _records
from tests.reader.capture.test_capture_eventheader import (
    EH_FORMATS,
    _decode,
    _eventheader_records,
    _items,
)
from tests.support.captures import perf_data, perf_sample
from tests.support.otlp_metrics_captures import (
    RESOURCE,
    SCOPE,
    otlp_metrics_format,
    otlp_metrics_record,
    sample_metrics,
    sample_requests,
)

METRICS_ID = 420
METRICS_FORMATS = [("user_events", otlp_metrics_format(METRICS_ID))]
BAD_PID = 888


def _metric_records() -> list[bytes]:
    """One record per point, as the producers write them; then two bad ones."""
    good = [otlp_metrics_record(METRICS_ID, buffer) for buffer in sample_requests()]
    bad = [
        otlp_metrics_record(METRICS_ID, b"\x0a\xff", pid=BAD_PID),
        otlp_metrics_record(METRICS_ID, sample_requests()[0], pid=BAD_PID, protocol=2),
    ]
    return good + bad


def _all_records() -> list[bytes]:
    return _records()[2] + _eventheader_records() + _metric_records()


def _trace_dat(tmp_path: Any, raws: list[bytes] | None = None) -> str:
    raws = _all_records() if raws is None else raws
    return _capture(tmp_path, _pages(raws), FORMATS + EH_FORMATS + METRICS_FORMATS)


def _metrics(lines: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
    """(resource, scope, metric with its one point) of each point, in name order."""
    found = []
    for line in lines:
        for resource in line.get("resourceMetrics", ()):
            for scope in resource["scopeMetrics"]:
                for metric in scope["metrics"]:
                    found.append((resource["resource"], scope["scope"], metric))
    return sorted(found, key=lambda item: item[2]["name"])


def _expected() -> list[tuple[Any, Any, Any]]:
    """The same points, as the SDK's own data goes through the reader's OTLP/JSON."""
    data = MetricsData([ResourceMetrics(RESOURCE, [SdkScopeMetrics(SCOPE, sample_metrics(), "")],
                                        "")])  # fmt: skip
    return _metrics([metrics_data_request(data)])


def test_decode_gives_each_request_as_the_metrics_it_carries(tmp_path):
    lines, summary, status = _decode(_trace_dat(tmp_path), "--workers", "1")
    assert status == 0
    got = _metrics(lines)
    assert got == _expected() and len(got) == 4
    assert got[0][0]["attributes"][0] == {"key": "service.name",
                                          "value": {"stringValue": "inventory"}}  # fmt: skip
    assert "4 metric points rebuilt" in summary and "inventory (4)" in summary
    assert "5 invalid (" in summary and f"{BAD_PID}: 2" in summary  # 3 EventHeader ones
    assert "otlp_metrics.buffer: not an ExportMetricsServiceRequest: 1" in summary
    assert _items(lines, "spans") and _items(lines, "logs")  # beside ours and EventHeader's


def test_a_perf_data_of_the_same_records_decodes_to_the_same_metrics(tmp_path):
    raws = _all_records()
    samples = [perf_sample(raw, 1000 + 10 * n, cpu=n % 2) for n, raw in enumerate(raws)]
    path = tmp_path / "perf.data"
    path.write_bytes(perf_data(FORMATS + EH_FORMATS + METRICS_FORMATS, samples))
    lines, summary, status = _decode(str(path))
    want_lines, want_summary, _ = _decode(_trace_dat(tmp_path, raws), "--workers", "1")
    assert status == 0 and "(perf.data)" in summary
    assert _metrics(lines) == _metrics(want_lines) == _expected()
    assert summary.split("): ", 1)[1] == want_summary.split("): ", 1)[1]


def test_decode_with_workers_gives_the_same_metrics_and_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(decode_stage, "WORKERS_FROM", 0)
    path = _trace_dat(tmp_path)
    one = _decode(path, "--workers", "1")
    two = _decode(path, "--workers", "2")
    assert _metrics(two[0]) == _metrics(one[0]) == _expected()
    assert two[1] == one[1] and "otlp_metrics.buffer" in two[1]


def test_alone_each_bad_record_is_counted_by_its_reason(tmp_path):
    lines, summary, status = _decode(_trace_dat(tmp_path, _metric_records()))
    assert status == 0 and _metrics(lines) == _expected()
    assert "2 invalid (otlp_metrics.buffer: not an ExportMetricsServiceRequest: 1; " in summary
    assert f"otlp_metrics.protocol: not 0 (protobuf): 1; by writer pid {BAD_PID}: 2)" in summary


def test_the_tree_view_and_an_exporter_show_the_metrics(tmp_path, monkeypatch):
    path = _trace_dat(tmp_path, _metric_records())
    out = tmp_path / "tree.txt"
    assert cli.main(["decode", path, "--format", "tree", "-o", str(out)]) == 0
    tree = out.read_text()
    for name in ("items.sold", "stock.level", "pick.duration", "queue.wait"):
        assert name in tree
    assert "inventory" in tree

    exported: list[MetricsData] = []
    monkeypatch.setattr(ConsoleMetricExporter, "export",
                        lambda self, data, **kw: exported.append(data))  # fmt: skip
    assert cli.main(["decode", path, "--exporter", "console"]) == 0
    metrics = [
        (resource.resource.attributes["service.name"], scope.scope.name, metric.name)
        for data in exported
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    ]
    assert sorted(metrics) == [("inventory", "inventory.meter", m.name)
                               for m in sorted(sample_metrics(), key=lambda m: m.name)]  # fmt: skip


def test_provider_otlp_metrics_reads_it_alone_and_another_provider_skips_it(tmp_path):
    path = _trace_dat(tmp_path)
    lines, summary, status = _decode(path, "--provider", "otlp_metrics")
    assert status == 0 and _metrics(lines) == _expected()
    names = {item.get("eventName") for _, item in _items(lines, "logs")}
    assert not names & {"MyEvent", "Orders.Shipping"}  # no EventHeader provider read
    lines, summary, status = _decode(path, "--provider", "MyProvider")
    assert status == 0 and _metrics(lines) == []
    assert "invalid" not in summary and "metric points" not in summary
    # its six records, and the five of EventHeader providers other than MyProvider
    assert "11 records of other prefixes or providers skipped" in summary
