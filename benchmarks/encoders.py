# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The encoders alone, on the host: microseconds to encode the benchmark's span and log
record into a user_events payload (the default format, and EventHeader's Common Schema),
against OTLP's protobuf encoding of the same item, side by side in one run (best of the
rounds); ``--profile`` adds where the time goes.

    .venv/bin/python benchmarks/encoders.py [--profile]

``python -m benchmarks`` measures the whole listened path in the guest; this is the part
an encoder change moves, measured where the timing is steady.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry._logs import SeverityNumber  # noqa: E402
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import (  # noqa: E402
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from benchmarks.configs import ATTRIBUTES, RESOURCE, span_workload  # noqa: E402
from benchmarks.measure import calling, measure, summary  # noqa: E402
from opentelemetry_exporter_userevents._export import common_schema_log as cs_log  # noqa: E402
from opentelemetry_exporter_userevents._export import common_schema_span as cs_span  # noqa: E402
from opentelemetry_exporter_userevents._export.common_schema_envelope import (  # noqa: E402
    CloudRole,
)
from opentelemetry_exporter_userevents._export.log_encoder import encode_log  # noqa: E402
from opentelemetry_exporter_userevents._export.span_encoder import encode_span  # noqa: E402

MAX_SIZE = 4064


def items() -> tuple[Any, Any]:
    """The benchmark's span (4 attributes, 1 event) and log record (4 attributes), ended."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=RESOURCE)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    span_workload(tracer_provider.get_tracer("checkout", "1.0.0"))(1)
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(resource=RESOURCE)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    logger_provider.get_logger("checkout", "1.0.0").emit(
        severity_number=SeverityNumber.INFO,
        severity_text="INFO",
        body="cart loaded",
        attributes=ATTRIBUTES,
    )
    return spans.get_finished_spans()[0], logs.get_finished_logs()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="store_true", help="cProfile each encoder")
    parser.add_argument("-n", type=int, default=20_000, help="encodings per timing")
    parser.add_argument("--rounds", type=int, default=9)
    options = parser.parse_args()
    span, log = items()
    role = CloudRole()
    work: dict[str, Callable[[], object]] = {
        "encode_span": lambda: encode_span(span, 1, MAX_SIZE),
        "eventheader span": lambda: cs_span.encode_span(span, 1, MAX_SIZE, role),
        "OTLP span": lambda: encode_spans([span]).SerializeToString(),
        "encode_log": lambda: encode_log(log, 1, MAX_SIZE),
        "eventheader log": lambda: cs_log.encode_log(log, 1, MAX_SIZE, role),
        "OTLP log record": lambda: encode_logs([log]).SerializeToString(),
    }
    samples = measure(lambda name: calling(name, work[name]), list(work), options.n, options.rounds)
    best = {name: timing["best"] / 1000 for name, timing in summary(samples).items()}
    for name, micros in best.items():
        print(f"{name:16} {micros:7.2f} µs")
    print(f"encode_span / OTLP: {best['encode_span'] / best['OTLP span']:.1%}")
    print(f"encode_log / OTLP:  {best['encode_log'] / best['OTLP log record']:.1%}")
    print(f"eventheader span / OTLP: {best['eventheader span'] / best['OTLP span']:.1%}")
    print(f"eventheader log / OTLP:  {best['eventheader log'] / best['OTLP log record']:.1%}")
    if options.profile:
        for name in ("encode_span", "encode_log", "eventheader span", "eventheader log"):
            profiler = cProfile.Profile()
            call = work[name]
            profiler.runcall(lambda: [call() for _ in range(options.n)])  # noqa: B023
            print(f"\n{name}, by own time:")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
