# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""ExportStats as OpenTelemetry metrics: what a metric reader collects."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from opentelemetry_exporter_userevents import UserEventsLogExporter, UserEventsSpanExporter
from tests.support.fake_kernel import FakeKernel
from tests.support.span_fixtures import make_logs, make_spans


def collected(reader: InMemoryMetricReader) -> dict[str, dict[tuple, int]]:
    """metric name -> {sorted attribute items: value}."""
    found: dict[str, dict[tuple, int]] = {}
    for resource_metrics in reader.get_metrics_data().resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                points = found.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    points[tuple(sorted(point.attributes.items()))] = point.value
    return found


@pytest.fixture
def reader():
    reader = InMemoryMetricReader()
    yield reader, MeterProvider(metric_readers=[reader])


def test_span_exporter_stats_become_the_sdk_exporter_metrics(monkeypatch, tmp_path, reader):
    reader, provider = reader
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="m")
    exporter.instrument_metrics(provider)
    exporter.instrument_metrics(provider)  # idempotent
    spans = make_spans()
    exporter.export(spans)
    exporter._writer.count("dropped_detached", 3)
    exporter._writer.count("not_listened", 5)

    metrics = collected(reader)
    fake.settle(exporter)

    exported = metrics["otel.sdk.exporter.span.exported"]
    (component,) = [key for key in exported if "error.type" not in dict(key)]
    assert dict(component)["otel.component.type"] == "user_events_span_exporter"
    assert dict(component)["otel.component.name"].startswith("user_events_span_exporter/")
    assert exported[component] == len(spans) + 1, "the spans and the resource record"
    assert exported[tuple(sorted(component + (("error.type", "detached"),)))] == 3
    assert exported[tuple(sorted(component + (("error.type", "invalid"),)))] == 0
    assert len(exported) == 6, "written, and one point per kind of drop"
    assert metrics["user_events.exporter.span.not_listened"] == {component: 5}
    assert metrics["user_events.exporter.span.truncated"] == {component: 0}


def test_log_exporter_metrics_follow_its_stats(monkeypatch, tmp_path, reader):
    reader, provider = reader
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsLogExporter(tracefs=fake.tracefs, prefix="m")
    exporter.instrument_metrics(provider)

    exporter.export(make_logs())
    first = collected(reader)["otel.sdk.exporter.log.exported"]
    exporter.export(make_logs())
    second = collected(reader)["otel.sdk.exporter.log.exported"]
    fake.settle(exporter)

    (written_key,) = [key for key in first if "error.type" not in dict(key)]
    assert first[written_key] == 25 + 1 and second[written_key] == 50 + 1
    assert dict(written_key)["otel.component.type"] == "user_events_log_exporter"
