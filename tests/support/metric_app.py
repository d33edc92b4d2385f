# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A short app that writes metric points: it waits (up to 60 s) until a reader listens to
its metric tracepoints, records a counter, a histogram and a gauge, collects twice, and
exits. It prints, as one JSON line, the OTLP/JSON of each collection its SDK handed to the
exporter, so a test can compare it with what arrived downstream.

``python -m tests.support.metric_app PREFIX SERVICE``
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData
from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents import UserEventsMetricExporter, UserEventsMetricReader
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json


class CapturingExporter(UserEventsMetricExporter):
    """The product exporter, keeping each MetricsData it was handed."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.captured: list[MetricsData] = []

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.captured.append(metrics_data)
        return super().export(metrics_data, timeout_millis, **kwargs)


def main(prefix: str, service: str) -> list[dict[str, Any]]:
    exporter = CapturingExporter(prefix=prefix)
    reader = UserEventsMetricReader(exporter, export_interval_millis=math.inf)
    provider = MeterProvider(
        metric_readers=[reader], resource=Resource({"service.name": service, "n": 1})
    )
    deadline = time.monotonic() + 60
    while not exporter.listened and time.monotonic() < deadline:
        time.sleep(0.05)
    meter = provider.get_meter(f"{service}.meter", "1.0")
    counter = meter.create_counter("requests", unit="{request}", description="served")
    histogram = meter.create_histogram("latency", unit="ms")
    gauge = meter.create_gauge("temperature")
    counter.add(5, {"route": "/a"})
    histogram.record(7.25, {"route": "/a"})
    gauge.set(21.5)
    reader.force_flush()
    counter.add(2, {"route": "/b"})
    histogram.record(99.0)
    reader.force_flush()
    provider.shutdown()
    return [otlp_json.metrics_data_request(data) for data in exporter.captured]


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1], sys.argv[2])) + "\n")
