# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader writers read live: a reader started first with ``--provider NAME`` holds the
provider's tracepoints, so a short job that writes at once and exits (as the Rust exporter
writes, single-format ``NAME_L4K1``) has its first span rebuilt; under ``--provider '*'``
a provider that appears later is found by a rescan and named in the summary as one whose
first records may have been missed. The metric exporters' ``otlp_metrics`` tracepoint is
held under ``--provider '*'`` from the start too, so a short job's metrics are rebuilt as
the OTLP request it wrote. The host side is tests/reader/live/test_eventheader_providers.py
and tests/reader/live/test_otlp_metrics_live.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from opentelemetry.sdk.metrics.export import MetricsData, ResourceMetrics, ScopeMetrics

from opentelemetry_exporter_userevents.reader.outputs.exporters.otlp_json import (
    metrics_data_request,
)
from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp_metrics_captures import RESOURCE, SCOPE, sample_metrics
from tests.support.reader_process import ROOT

pytestmark = pytest.mark.kernel


def _writer(provider: str, name: str, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.eventheader_writer", provider, name, *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip


def _span_names(output) -> list[str]:
    spans, _ = proc.requests(output)
    return [
        span["name"]
        for request in spans
        for resource in request["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def test_a_reader_started_first_gets_a_providers_first_span(prefix, tmp_path):
    provider = f"{prefix}Prov"
    reader, output = proc.reader(tmp_path, "--prefix", prefix, "--provider", provider)
    writer = _writer(provider, "first span")
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0 and out.strip() == "1", err  # listened to at registration
    assert wait_until(lambda: output.exists() and _span_names(output) == ["first span"], 30)
    summary = proc.stop(reader)
    assert "lost 0" in summary and "cart (1)" in summary
    assert "invalid" not in summary and "EventHeader providers may have lost" not in summary


def test_every_provider_is_found_and_a_late_one_named(prefix, tmp_path):
    provider = f"{prefix}Late"
    reader, output = proc.reader(tmp_path, "--prefix", prefix, "--provider", "*")
    writer = _writer(provider, "found by a rescan", "--wait-listened")
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0 and out.strip() == "1", err
    assert wait_until(lambda: output.exists() and "found by a rescan" in _span_names(output), 30)
    summary = proc.stop(reader)
    assert "EventHeader providers may have lost their first records" in summary
    assert f"{provider} (found " in summary


def _metrics(output) -> list[tuple[str, str, dict]]:
    """(service.name, scope, metric with its point) of each metric written, by name."""
    found = []
    for line in output.read_text().splitlines():
        for resource in json.loads(line).get("resourceMetrics", ()):
            attributes = {a["key"]: a["value"] for a in resource["resource"]["attributes"]}
            service = attributes["service.name"]["stringValue"]
            for scope in resource["scopeMetrics"]:
                found += [(service, scope["scope"]["name"], m) for m in scope["metrics"]]
    return sorted(found, key=lambda item: item[2]["name"])


def test_a_reader_of_every_provider_gets_a_metric_writers_first_points(prefix, tmp_path):
    """The reader holds ``otlp_metrics`` from its start: a short job that registers it
    and writes at once (as a process that exports at exit) is listened to already."""
    reader, output = proc.reader(tmp_path, "--prefix", prefix, "--provider", "*")
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.support.otlp_metrics_writer"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0 and out.strip() == "4", err  # listened to at registration
    assert wait_until(lambda: output.exists() and len(_metrics(output)) == 4, 30)
    summary = proc.stop(reader)
    got = _metrics(output)
    data = MetricsData([ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, sample_metrics(), "")],
                                        "")])  # fmt: skip
    want = metrics_data_request(data)["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
    assert [m for _, _, m in got] == sorted(want, key=lambda m: m["name"])
    assert {(service, scope) for service, scope, _ in got} == {("inventory", "inventory.meter")}
    assert "lost 0" in summary and "inventory (4)" in summary and "invalid" not in summary
