# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Metrics: the cost of one collection cycle, and of encoding one collection, side by side.

    .venv/bin/python -m benchmarks.metrics            # on the host
    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python -m benchmarks.metrics

The workload: 8 counters, 4 up-down counters, 4 histograms (explicit buckets) and 2
exponential histograms, each with 10 attribute sets, and 4 observable gauges of 5 points
each: 200 data points per collection. Rows, per collection cycle:

- ``sdk_cycle``: the SDK's PeriodicExportingMetricReader with this exporter, nobody
  listening: the SDK collects (callbacks, aggregation) and the exporter skips each point;
- ``ue_cycle``: UserEventsMetricReader, nobody listening: the cycle is skipped whole;
- ``collect``: the SDK's collection alone (InMemoryMetricReader), for reference;
- ``otlp_encode``: the OTLP exporters' encoder (encode_metrics, to protobuf bytes) of one
  collection;
- ``ue_encode``: this exporter's encoding of the same collection, one record per point
  (what a listened export does before its writes);
- ``ue_listened`` (the test bed only: needs user_events): ``export`` of the same collection
  while ftrace listens, every record written.

Rows are timed in shuffled rounds (benchmarks.measure); only ratios within one run count.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
from opentelemetry.metrics import Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource

from benchmarks.configs import Setup, quiet
from benchmarks.measure import measure, summary
from opentelemetry_exporter_userevents import UserEventsMetricExporter, UserEventsMetricReader
from opentelemetry_exporter_userevents._export.metric_encoder import encode_point
from opentelemetry_exporter_userevents.metric_exporter import data_points
from testbed import guest

RESOURCE = Resource({"service.name": "checkout", "host.name": "bench"})
PREFIX = "bench_metrics"
HOST_KEYS = ("sdk_cycle", "ue_cycle", "collect", "otlp_encode", "ue_encode")
GUEST_KEYS = (*HOST_KEYS, "ue_listened")
LABELS = {
    "sdk_cycle": "PeriodicExportingMetricReader(user_events), nobody listening",
    "ue_cycle": "UserEventsMetricReader, nobody listening",
    "collect": "the SDK's collection alone (InMemoryMetricReader)",
    "otlp_encode": "OTLP encoding of one collection (encode_metrics + protobuf bytes)",
    "ue_encode": "user_events encoding of the same collection",
    "ue_listened": "user_events export of the same collection, ftrace listening",
}


def provider_with(reader: MetricReader) -> MeterProvider:
    """The workload's instruments, measured once (cumulative state: every cycle has all
    200 points)."""
    provider = MeterProvider(
        metric_readers=[reader],
        resource=RESOURCE,
        views=[View(instrument_name="exp.*", aggregation=ExponentialBucketHistogramAggregation())],
    )
    meter = provider.get_meter("bench", "1.0")
    sets = [{"http.route": f"/r/{i}", "http.response.status_code": 200 + i} for i in range(10)]
    for number in range(8):
        counter = meter.create_counter(f"requests.{number}", "{request}", "Requests")
        for attributes in sets:
            counter.add(number + 1, attributes)
    for number in range(4):
        updown = meter.create_up_down_counter(f"queue.{number}")
        for attributes in sets:
            updown.add(-number, attributes)
    for number in range(4):
        histogram = meter.create_histogram(f"latency.{number}", "ms")
        for i, attributes in enumerate(sets):
            histogram.record(i * 7.5 + number, attributes)
    for number in range(2):
        exponential = meter.create_histogram(f"exp.{number}", "ms")
        for i, attributes in enumerate(sets):
            exponential.record(i * 0.37 + 1, attributes)
    for number in range(4):
        observations = [Observation(i * 1.5, {"cpu": i}) for i in range(5)]
        meter.create_observable_gauge(f"cpu.{number}", [lambda options, o=observations: o])
    return provider


def collection() -> MetricsData:
    reader = InMemoryMetricReader()
    provider_with(reader)
    data = reader.get_metrics_data()
    assert data is not None
    return data


def make(key: str) -> Setup:
    if key in ("sdk_cycle", "ue_cycle"):
        exporter = UserEventsMetricExporter(prefix=PREFIX + "_" + key)
        if key == "sdk_cycle":
            periodic = PeriodicExportingMetricReader(exporter, export_interval_millis=math.inf)
            provider = provider_with(periodic)

            def run(n: int) -> None:
                for _ in range(n):
                    periodic.collect()

        else:
            reader = UserEventsMetricReader(exporter, export_interval_millis=math.inf)
            provider = provider_with(reader)

            def run(n: int) -> None:
                for _ in range(n):
                    reader._collect_if_listened(10_000)  # what its ticker does each cycle

        return Setup(key, run, [provider.shutdown])
    if key == "collect":
        memory = InMemoryMetricReader()
        provider = provider_with(memory)
        return Setup(key, lambda n: [memory.get_metrics_data() for _ in range(n)] and None,
                     [provider.shutdown])  # fmt: skip
    data = collection()
    if key == "otlp_encode":
        return Setup(key, lambda n: [encode_metrics(data).SerializeToString() for _ in range(n)]
                     and None)  # fmt: skip
    if key == "ue_encode":
        items = data_points(data)
        points = list(items)

        def encode(n: int) -> None:
            for _ in range(n):
                for item in data_points(data):
                    encode_point(item, 1, 4064)

        assert len(points) == 200
        return Setup(key, encode)
    if key == "ue_listened":
        return listened(data)
    raise KeyError(key)


def listened(data: MetricsData) -> Setup:
    """In the test bed: the exporter with every metric tracepoint enabled in an ftrace
    instance of its own."""
    from opentelemetry_exporter_userevents.abi.tracefs import Tracefs  # noqa: PLC0415

    exporter = UserEventsMetricExporter(prefix=PREFIX + "_listened")
    tracefs = Tracefs.find()
    assert tracefs is not None
    instance = "bench_metrics"
    os.makedirs(os.path.join(tracefs.path, "instances", instance), exist_ok=True)
    registrations = [r for r in exporter.registrations.values() if r is not None]
    for registration in registrations:
        assert registration.tracepoint
        tracefs.set_enabled(registration.system, registration.tracepoint, True, instance)
    assert exporter.listened

    def run(n: int) -> None:
        for _ in range(n):
            exporter.export(data)

    def close() -> None:
        for registration in registrations:
            assert registration.tracepoint
            tracefs.set_enabled(registration.system, registration.tracepoint, False, instance)
        os.rmdir(os.path.join(tracefs.path, "instances", instance))
        exporter.shutdown()

    return Setup("ue_listened", run, [close])


def run_all(keys: tuple[str, ...], n: int, rounds: int) -> dict[str, Any]:
    quiet()
    return summary(measure(make, keys, n, rounds))


def text(results: dict[str, dict[str, Any]]) -> str:
    lines = []
    for where, rows in results.items():
        if not rows:
            continue
        lines.append(f"{where}: µs per collection cycle of 200 points (best of rounds)")
        for key, row in rows.items():
            lines.append(f"  {key:<12} {row['best'] / 1000:>10.1f}  {LABELS[key]}")
        best = {key: row["best"] for key, row in rows.items()}
        lines.append(
            f"  ue_cycle / sdk_cycle = {best['ue_cycle'] / best['sdk_cycle']:.4f}; "
            f"ue_encode / otlp_encode = {best['ue_encode'] / best['otlp_encode']:.2f}"
            + (
                f"; ue_listened / otlp_encode = {best['ue_listened'] / best['otlp_encode']:.2f}"
                if "ue_listened" in best
                else ""
            )
        )
    return "\n".join(lines)


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metrics", description=__doc__)
    parser.add_argument("-n", type=int, default=20, help="cycles per timing")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--kernel", default=os.environ.get(guest.KERNEL_ENV))
    parser.add_argument("--inside-guest", metavar="FILE", help=argparse.SUPPRESS)
    options = parser.parse_args(args)
    if options.inside_guest:
        result = run_all(GUEST_KEYS, options.n, options.rounds)
        Path(options.inside_guest).write_text(json.dumps(result))
        return 0
    results: dict[str, Any] = {"host": run_all(HOST_KEYS, options.n, options.rounds)}
    reason = guest.unavailable_reason(options.kernel)
    if reason:
        print(f"benchmarks.metrics: no test bed run: {reason}", file=sys.stderr)
    else:
        path = Path(tempfile.mkdtemp()) / "guest.json"
        command = f"{sys.executable} -m benchmarks.metrics -n {max(options.n // 4, 2)} "
        command += f"--rounds {options.rounds} --inside-guest $TESTBED_SHARE/guest.json"
        done = guest.run(
            options.kernel,
            ["sh", "-c", command],
            timeout=1800,
            keep=lambda share: shutil.copy(share / "guest.json", path),
        )
        if done.returncode == 0 and path.exists():
            results["guest (emulated: ratios only)"] = json.loads(path.read_text())
        else:
            print(done.console[-3000:], file=sys.stderr)
    print(text(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
