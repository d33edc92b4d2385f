# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Self-observability as the OTLP exporters report it: ``otel.sdk.exporter.*.exported`` with
``otel.component.type`` and ``otel.component.name``, switched on for all three exporters by
OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED and reported through their ``meter_provider``."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsMetricExporter,
    UserEventsSpanExporter,
)
from tests.support.fake_kernel import FakeKernel
from tests.support.span_fixtures import make_logs, make_spans
from tests.test_metric_exporter import _collection
from tests.test_self_metrics import collected

EXPORTERS = {
    "span": (UserEventsSpanExporter, make_spans),
    "log": (UserEventsLogExporter, make_logs),
    "metric_data_point": (UserEventsMetricExporter, lambda: _collection()),
}


def _items(signal, batch) -> int:
    if signal != "metric_data_point":
        return len(batch)
    return sum(
        len(m.data.data_points)
        for rm in batch.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    )


@pytest.mark.parametrize("signal", list(EXPORTERS))
def test_the_environment_switches_on_the_sdk_exporter_metrics(monkeypatch, tmp_path, signal):
    monkeypatch.setenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "True")
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    fake = FakeKernel(monkeypatch, tmp_path)
    cls, make = EXPORTERS[signal]
    exporter = cls(tracefs=fake.tracefs, prefix="s", meter_provider=provider)
    batch = make()
    exporter.export(batch)
    metrics = collected(reader)
    fake.settle(exporter)

    exported = metrics[f"otel.sdk.exporter.{signal}.exported"]
    (ok,) = [key for key in exported if "error.type" not in dict(key)]
    component = dict(ok)
    assert component["otel.component.type"] == f"user_events_{signal}_exporter"
    assert component["otel.component.name"].startswith(f"user_events_{signal}_exporter/")
    assert exported[ok] == _items(signal, batch) + 1, "every item and the resource record"
    assert metrics[f"user_events.exporter.{signal}.not_listened"] == {ok: 0}


@pytest.mark.parametrize("value", [None, "false", "yes"])
def test_without_the_switch_nothing_is_reported(monkeypatch, tmp_path, value):
    if value is None:
        monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", raising=False)
    else:
        monkeypatch.setenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", value)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsMetricExporter(tracefs=fake.tracefs, meter_provider=provider)
    exporter.export(_collection())
    data = reader.get_metrics_data()
    fake.settle(exporter)
    assert data is None or not data.resource_metrics
