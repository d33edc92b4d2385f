# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``OTEL_EXPORTER_USER_EVENTS_FORMAT=eventheader`` on the kernel: an app under
``opentelemetry-instrument`` writes Common Schema events on ``<provider>_L<level>K1``, and a
reader started first with ``record --provider <provider>`` (which holds the provider's
tracepoints, so the app's first records are listened to) rebuilds its spans and its
``logging`` records, each record in its span, less what Common Schema cannot carry; and
Microsoft's ``perf-decode`` (LinuxTracepoints, built under LINUXTRACEPOINTS_BUILD) reads
every field of the same events as it reads a Rust exporter's, with the values our reader
gave. Its metric exporter writes ``otlp_metrics`` (one OTLP request a point), which a reader
started first with ``--provider otlp_metrics`` rebuilds as the app's SDK made the points.
The host side: tests/test_common_schema_output.py, tests/test_eventheader_exporters.py,
tests/test_eventheader_metrics.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reader.decode.eventheader_json import normal
from tests.support import linuxtracepoints
from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten, metric_points

pytestmark = pytest.mark.kernel

APP = """
import logging
from opentelemetry import trace

tracer = trace.get_tracer("shop")
log = logging.getLogger("shop")
for number in range(3):
    with tracer.start_as_current_span(f"order {number}", attributes={"order": number}):
        log.warning("order %d placed", number)
"""


def instrumented(provider: str) -> dict[str, str]:
    """The drop-in line's environment (README), with the option and the provider set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return {
        **env,
        "OTEL_PYTHON_CONFIGURATOR": "user_events",
        "OTEL_TRACES_EXPORTER": "user_events",
        "OTEL_LOGS_EXPORTER": "user_events",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "shop",
        "OTEL_EXPORTER_USER_EVENTS_FORMAT": "eventheader",
        "OTEL_EXPORTER_USER_EVENTS_PREFIX": provider,
    }


def run_app(tmp_path, provider: str) -> None:
    (tmp_path / "app.py").write_text(APP)
    app = subprocess.run(
        ["opentelemetry-instrument", "python", "app.py"], cwd=tmp_path,
        env=instrumented(provider), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert app.returncode == 0, app.stderr
    assert "Traceback" not in app.stderr, app.stderr


def arrived(output) -> tuple[list[dict], list[dict], list[dict]]:
    """Spans, logs and the span requests' resources the reader wrote so far."""
    span_requests, log_requests = proc.requests(output) if output.exists() else ([], [])
    spans = [json.loads(x)["item"] for x in flatten(span_requests, "spans").values()]
    logs = [json.loads(x)["item"] for x in flatten(log_requests, "logs").values()]
    resources = [r["resource"] for q in span_requests for r in q["resourceSpans"]]
    return spans, logs, resources


def test_an_instrumented_app_is_rebuilt_by_a_reader_started_first(prefix, tmp_path):
    provider = f"{prefix}Py"
    reader, output = proc.reader(tmp_path, "--prefix", prefix, "--provider", provider)
    run_app(tmp_path, provider)

    assert wait_until(lambda: [len(x) for x in arrived(output)[:2]] == [3, 3], 60), arrived(output)
    summary = proc.stop(reader)
    assert "lost 0" in summary and "invalid" not in summary, summary
    spans, logs, resources = arrived(output)
    assert sorted(s["name"] for s in spans) == ["order 0", "order 1", "order 2"]
    for span in spans:
        number = int(span["name"].split()[1])
        assert span["attributes"] == [{"key": "order", "value": {"intValue": str(number)}}]
        assert span["kind"] == 1  # SPAN_KIND_INTERNAL
        assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"]) > 0
        assert "parentSpanId" not in span or span["parentSpanId"] == ""
    service = {"key": "service.name", "value": {"stringValue": "shop"}}
    assert all(service in r.get("attributes", []) for r in resources), resources
    span_of = {s["name"]: (s["traceId"], s["spanId"]) for s in spans}
    assert sorted(x["body"]["stringValue"] for x in logs) == [
        "order 0 placed", "order 1 placed", "order 2 placed",
    ]  # fmt: skip
    for log in logs:
        number = log["body"]["stringValue"].split()[1]
        assert (log["traceId"], log["spanId"]) == span_of[f"order {number}"]
        assert log["severityNumber"] == 13 and log["severityText"] == "WARN"


def rfc3339(nanos: str) -> str:
    """OTLP's nanoseconds as Rust writes them (chrono's AutoSi), to compare with PartA."""
    seconds, fraction = divmod(int(nanos), 1_000_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    digits = next(d for d in (0, 3, 6, 9) if fraction % 10 ** (9 - d) == 0)
    return text + (f".{fraction // 10 ** (9 - digits):0{digits}d}" if digits else "") + "Z"


def perf_decode_events(path: Path) -> list[Any]:
    """The events of perf-decode's JSON: a document ``{"<file>": [events]}`` (the samples
    of TestOutput hold only its member: tests/reader/decode/eventheader_json.py)."""
    text = path.read_bytes().removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogateescape")
    ((_name, events),) = json.loads(text, object_pairs_hook=list)
    return [normal(event) for event in events]


def as_dict(pairs: list[Any]) -> dict[str, Any]:
    return {name: as_dict(value) if _is_struct(value) else value for name, value in pairs}


def _is_struct(value: Any) -> bool:
    return (
        isinstance(value, list)
        and all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str) for x in value)
        and bool(value)
    )


def test_perf_decode_reads_every_field_as_our_reader_does(prefix, tmp_path):
    tools = linuxtracepoints.require() / "bin"  # CI builds it: missing, the test fails
    provider = f"{prefix}Pd"
    reader, output = proc.reader(tmp_path, "--prefix", prefix, "--provider", provider)
    data, log = tmp_path / "perf.data", tmp_path / "perf-collect.log"
    with log.open("w") as stderr:
        collect = subprocess.Popen(
            [str(tools / "perf-collect"), "-o", str(data),
             *(f"user_events:{provider}_L{level}K1" for level in (3, 4))],
            stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
        )  # fmt: skip
    try:
        assert wait_until(lambda: "collecting until" in log.read_text(), 120), log.read_text()
        run_app(tmp_path, provider)
        assert wait_until(lambda: [len(x) for x in arrived(output)[:2]] == [3, 3], 60)
    finally:
        collect.send_signal(signal.SIGINT)
        collect.wait(timeout=120)
    proc.stop(reader)
    decoded = subprocess.run(
        [str(tools / "perf-decode"), "-o", str(tmp_path / "perf.json"), str(data)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert decoded.returncode == 0, decoded.stderr
    events = [as_dict(e) for e in perf_decode_events(tmp_path / "perf.json")]
    spans, logs, resources = arrived(output)
    instance = {  # the SDK gives every resource an instance id, which our reader rebuilt
        a["value"]["stringValue"]
        for r in resources
        for a in r["attributes"]
        if a["key"] == "service.instance.id"
    }
    assert len(instance) == 1, resources
    ours = [e for e in events if str(e.get("n", "")).startswith(provider + ":")]
    by_span = {(e["PartA"]["ext_dt_traceId"], e["PartA"]["ext_dt_spanId"]): e for e in ours
               if e["n"] == f"{provider}:Span"}  # fmt: skip
    assert len(by_span) == 3, ours
    for span in spans:
        event = by_span[(span["traceId"], span["spanId"])]
        assert list(event) == ["n", "__csver__", "PartA", "PartB", "PartC", "meta"]
        assert event["__csver__"] == 1024 and event["meta"]["level"] == 4
        assert event["PartA"] == {
            "time": rfc3339(span["endTimeUnixNano"]),
            "ext_dt_traceId": span["traceId"],
            "ext_dt_spanId": span["spanId"],
            "ext_cloud_role": "shop",
            "ext_cloud_roleInstance": next(iter(instance)),
        }
        assert event["PartB"] == {
            "_typeName": "Span",
            "name": span["name"],
            "startTime": rfc3339(span["startTimeUnixNano"]),
            "success": True,
            "kind": 0,
        }
        assert event["PartC"] == {"order": int(span["attributes"][0]["value"]["intValue"])}
    log_events = [e for e in ours if e["n"] == f"{provider}:Log"]
    assert len(log_events) == 3
    by_body = {e["PartB"]["body"]: e for e in log_events}
    for record in logs:
        event = by_body[record["body"]["stringValue"]]
        assert event["__csver__"] == 1024 and event["meta"]["level"] == 3
        assert event["PartA"]["time"] == rfc3339(record["timeUnixNano"])
        assert event["PartA"]["ext_dt_traceId"] == record["traceId"]
        assert event["PartA"]["ext_dt_spanId"] == record["spanId"]
        assert event["PartB"] == {
            "_typeName": "Log",
            "body": record["body"]["stringValue"],
            "severityNumber": 13,
            "severityText": "WARN",
        }
        ours_attributes = {a["key"] for a in record.get("attributes", [])}
        assert set(event.get("PartC", {})) == ours_attributes


METRICS_APP = """
import json, math, sys
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry_exporter_userevents import UserEventsMetricExporter, UserEventsMetricReader
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json

class Capturing(UserEventsMetricExporter):  # the product exporter, keeping what it was handed
    captured = []
    def export(self, metrics_data, timeout_millis=10_000, **kwargs):
        self.captured.append(metrics_data)
        return super().export(metrics_data, timeout_millis, **kwargs)

exporter = Capturing()  # the format from OTEL_EXPORTER_USER_EVENTS_FORMAT
reader = UserEventsMetricReader(exporter, export_interval_millis=math.inf)
provider = MeterProvider(metric_readers=[reader], resource=Resource({"service.name": "shop"}))
meter = provider.get_meter("shop.meter", "1.0")
orders = meter.create_counter("orders", "{order}", "placed")
latency = meter.create_histogram("latency", "ms")
stock = meter.create_up_down_counter("stock")
temperature = meter.create_gauge("temperature")
orders.add(3, {"route": "/a"})
latency.record(7.25, {"route": "/a"})
stock.add(-2.5)
temperature.set(21)
reader.force_flush()
orders.add(1, {"route": "/b"})
latency.record(99.0)
reader.force_flush()
provider.shutdown()
print(json.dumps({
    "collections": [otlp_json.metrics_data_request(data) for data in exporter.captured],
    "registrations": sorted(exporter.registrations),
    "stats": exporter.stats.snapshot(),
}))
"""


def metric_requests(output) -> list[dict]:
    return [x for x in proc.written_lines(output) if "resourceMetrics" in x]


def test_an_apps_metrics_are_rebuilt_from_otlp_metrics_by_a_reader_started_first(prefix, tmp_path):
    """The metric exporter with the option writes each point as one OTLP request on
    ``otlp_metrics``, registered with the Rust exporter's fields after the reader holds it
    (no wait in the app: the reader's hold makes the first collection listened to)."""
    reader, output = proc.reader(tmp_path, "--prefix", prefix, "--provider", "otlp_metrics")
    (tmp_path / "metrics_app.py").write_text(METRICS_APP)
    env = {**instrumented(f"{prefix}Mx"), "OTEL_METRICS_EXPORTER": "user_events"}
    app = subprocess.run(
        [sys.executable, "metrics_app.py"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert app.returncode == 0 and "Traceback" not in app.stderr, app.stderr
    made = json.loads(app.stdout)
    assert made["registrations"] == ["otlp_metrics"]
    want = metric_points(made["collections"])
    count = sum(map(len, want.values()))
    assert count >= 8 and made["stats"]["written"] == count, made["stats"]  # 4, then 4 or more
    assert wait_until(
        lambda: sum(map(len, metric_points(metric_requests(output)).values())) >= count, 60
    ), metric_requests(output)
    summary = proc.stop(reader)
    assert metric_points(metric_requests(output)) == want
    assert "lost 0" in summary and "invalid" not in summary, summary
    assert f"shop ({count})" in summary, summary
