# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader benchmarks' capture: records of the benchmark's shape written in the test bed
while a reader's instance and ``perf record`` both listen, kept for replay on the host.

Three phases, one after the other: spans (4 attributes, 1 event), log records (4
attributes) and metric points (a counter, a histogram and a gauge, each with 10 sets of 4
attributes, collected by the SDK's periodic reader into the project's metric exporter),
all single-format (``multi_format=False``: the layout ``trace-cmd report`` and ``perf
script`` can parse). For each phase, ``perf record -a`` attaches first, then a fresh
``TraceReader``; the same records go to both. Kept: the reader's raw pages with their CPU,
the format files, tracefs's ``header_page``/``header_event`` (to write the pages as a
trace.dat, as ``record --capture`` does) and one perf.data per phase.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry._logs import Logger, SeverityNumber
from opentelemetry.metrics import Meter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer
from opentelemetry.util.types import AttributeValue

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsMetricExporter,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.reader import TraceReader
from opentelemetry_exporter_userevents.record.tracepoints import METRIC_KINDS
from testbed import guest

KINDS = ("span", "log", "metric")
STAT = {"span": "spans", "log": "logs", "metric": "metric_points"}
"""The ``JoinStats`` count of each phase's items."""
WHAT = {"span": "spans", "log": "logs", "metric": "metric points"}
ATTRIBUTE_SETS = 10
"""Attribute sets per instrument: 3 instruments x 10 = 30 metric points per collection."""


def of_kind(record_kind: str, kind: str) -> bool:
    """Whether a record of ``record_kind`` is an item of phase ``kind``."""
    return record_kind == kind or (kind == "metric" and record_kind in METRIC_KINDS)


def benchmark_span(tracer: Tracer, number: int) -> None:
    """One span of the benchmark's shape, as examples/app.py makes them: 4 attributes, 1
    event."""
    with tracer.start_as_current_span(
        "GET /cart/{id}",
        attributes={"http.request.method": "GET", "url.path": f"/cart/{number}",
                    "http.response.status_code": 200, "user.id": number},
    ) as span:  # fmt: skip
        span.add_event("cart loaded", {"items": number % 5})


def benchmark_log(logger: Logger, number: int) -> None:
    """One log record of the benchmark's shape: 4 attributes, a string body."""
    logger.emit(
        body="cart loaded", severity_number=SeverityNumber.INFO, severity_text="INFO",
        attributes={"http.request.method": "GET", "url.path": f"/cart/{number}",
                    "http.response.status_code": 200, "user.id": number},
    )  # fmt: skip


def metric_instruments(meter: Meter) -> Callable[[int], None]:
    """A counter, a histogram (explicit buckets) and a gauge; the returned function
    measures each once per attribute set (4 attributes)."""
    counter = meter.create_counter("http.server.requests", unit="{request}")
    histogram = meter.create_histogram("http.server.request.duration", unit="s")
    gauge = meter.create_gauge("cart.items", unit="{item}")
    sets: list[dict[str, AttributeValue]] = [
        {"http.request.method": "GET", "http.route": "/cart/{id}",
         "http.response.status_code": 200, "shard": shard}
        for shard in range(ATTRIBUTE_SETS)
    ]  # fmt: skip

    def measure(number: int) -> None:
        for shard, attributes in enumerate(sets):
            counter.add(1 + shard, attributes)
            histogram.record(0.001 * ((number + shard) % 250), attributes)
            gauge.set((number * 7 + shard) % 40, attributes)

    return measure


def _perf(path: Path, prefix: str) -> subprocess.Popen[bytes] | None:
    perf = shutil.which("perf")
    if perf is None:
        return None
    return subprocess.Popen(
        [perf, "record", "-q", "-a", "-m", "4096", "-e", f"user_events:{prefix}_*",
         "-o", str(path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def _wait_listened(registrations: list[Any], seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(r.enabled for r in registrations if r is not None):
            return True
        time.sleep(0.05)
    return False


def capture(share: Path, count: int, prefix: str = "bench") -> None:
    """In the guest: the three phases, ``count`` items each; ``share/pages.json`` and
    ``share/perf-KIND.data``."""
    resource = Resource({"service.name": "bench"})
    spans = UserEventsSpanExporter(prefix=prefix, multi_format=False)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(UserEventsSpanProcessor(spans))
    tracer = tracer_provider.get_tracer("bench", "1.0")
    logs = UserEventsLogExporter(prefix=prefix, multi_format=False)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(UserEventsLogRecordProcessor(logs))
    logger = logger_provider.get_logger("bench", "1.0")
    metrics = UserEventsMetricExporter(prefix=prefix, multi_format=False)
    metric_reader = PeriodicExportingMetricReader(metrics, export_interval_millis=math.inf)
    meter_provider = MeterProvider(metric_readers=[metric_reader], resource=resource)
    measure = metric_instruments(meter_provider.get_meter("bench", "1.0"))
    points_per_collection = 3 * ATTRIBUTE_SETS

    def one(kind: str, number: int) -> int:
        """Write item ``number`` of ``kind`` (a collection, for metrics): items written."""
        if kind == "span":
            benchmark_span(tracer, number)
            return 1
        if kind == "log":
            benchmark_log(logger, number)
            return 1
        measure(number)
        metric_reader.collect()
        return points_per_collection

    exporters: dict[str, Any] = {"span": spans, "log": logs, "metric": metrics}
    result: dict[str, Any] = {"pages": {}, "cpus": {}, "lost": 0, "written": 0, "perf": {}}
    formats: dict[str, str] = {}
    for kind in KINDS:
        exporter = exporters[kind]
        perf_path = share / f"perf-{kind}.data"
        perf = _perf(perf_path, prefix)
        registrations = list(exporter._writer.registrations.values())  # noqa: SLF001
        perf_listened = perf is not None and _wait_listened(registrations)
        written_before = exporter.stats.written
        kept: list[tuple[int, bytes]] = []
        with TraceReader(prefix=prefix, buffer_size_kb=65536) as reader:
            written, number = 0, 0
            while written < count:
                written += one(kind, number)
                number += 1
                if number % (1000 if kind != "metric" else 34) == 0:
                    kept += reader.read_cpu_pages()
            kept += reader.read_cpu_pages()
            formats.update((text, system) for system, text in reader.formats())
            result["lost"] += reader.lost
        result["written"] += exporter.stats.written - written_before
        result["pages"][kind] = [page.hex() for _, page in kept]
        result["cpus"][kind] = [cpu for cpu, _ in kept]
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            _, err = perf.communicate(timeout=600)
            if perf_listened and perf.returncode in (0, -signal.SIGINT):
                result["perf"][kind] = perf_path.name
            else:
                result.setdefault("perf_errors", {})[kind] = err.decode(errors="replace")[-500:]
    tracefs = Tracefs.find()
    assert tracefs is not None
    result["formats"] = [(system, text) for text, system in formats.items()]
    result["header_page"] = tracefs.header_page()
    result["header_event"] = tracefs.header_event()
    result["multi_format"] = False
    (share / "pages.json").write_text(json.dumps(result))


def run_capture(count: int, script: Path) -> Path | None:
    """On the host: boot the test bed, run ``script --capture`` there; the directory that
    holds ``pages.json`` and the perf.data files, or None (the reason printed)."""
    kernel = os.environ.get(guest.KERNEL_ENV)
    reason = guest.unavailable_reason(kernel)
    if reason is not None or kernel is None:
        print(f"{script.stem}: {reason}", file=sys.stderr)
        return None
    directory = Path(tempfile.mkdtemp(prefix="reader-capture-"))

    def keep(share: Path) -> None:
        for each in share.iterdir():
            if each.name == "pages.json" or each.name.startswith("perf-"):
                shutil.copy(each, directory / each.name)

    command = [sys.executable, str(script), "--spans", str(count),
               "--capture", "$TESTBED_SHARE"]  # fmt: skip
    result = guest.run(kernel, ["sh", "-c", " ".join(command)], timeout=1800, keep=keep)
    if result.returncode != 0 or not (directory / "pages.json").exists():
        print(result.console[-3000:], file=sys.stderr)
        return None
    return directory / "pages.json"
