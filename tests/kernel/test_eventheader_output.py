# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``OTEL_EXPORTER_USER_EVENTS_FORMAT=eventheader`` on the kernel: an app under
``opentelemetry-instrument`` writes Common Schema events on ``<provider>_L<level>K1``, and a
reader started first with ``record --provider <provider>`` (which holds the provider's
tracepoints, so the app's first records are listened to) rebuilds its spans and its
``logging`` records, each record in its span, less what Common Schema cannot carry. The
host side is tests/test_common_schema_output.py and tests/test_eventheader_exporters.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

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
