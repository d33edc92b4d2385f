# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the disabled processors add to the SDK's call, alone: nanoseconds per ``on_end`` /
``on_emit`` call of this package's processors nobody listens to, against processors that do
nothing, side by side in one run (best of the rounds). In ``python -m benchmarks`` the same
difference is a fraction of a whole span or log record, within that machine's noise.

    .venv/bin/python benchmarks/disabled_check.py
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import SpanProcessor  # noqa: E402

from benchmarks.configs import NothingLogRecordProcessor  # noqa: E402
from benchmarks.measure import calling, measure, summary  # noqa: E402
from opentelemetry_exporter_userevents import (  # noqa: E402
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)


def main(calls: int = 200_000, rounds: int = 15) -> None:
    logging.getLogger("opentelemetry_exporter_userevents").setLevel(logging.ERROR)
    span_exporter = UserEventsSpanExporter(prefix="bench_check")
    log_exporter = UserEventsLogExporter(prefix="bench_check")
    calls_of = {
        "spans, a processor that does nothing": SpanProcessor().on_end,
        "spans, UserEventsSpanProcessor": UserEventsSpanProcessor(span_exporter).on_end,
        "logs, a processor that does nothing": NothingLogRecordProcessor().on_emit,
        "logs, UserEventsLogRecordProcessor": UserEventsLogRecordProcessor(log_exporter).on_emit,
    }
    samples = measure(
        lambda name: calling(name, calls_of[name], None), list(calls_of), calls, rounds
    )
    best = {name: timing["best"] for name, timing in summary(samples).items()}
    for name, ns in best.items():
        print(f"{name:40} {ns:6.1f} ns per call")
    for signal in ("spans", "logs"):
        floor = best[f"{signal}, a processor that does nothing"]
        ours = next(v for k, v in best.items() if k.startswith(signal) and "UserEvents" in k)
        print(f"{signal}: the disabled processor adds {ours - floor:.1f} ns per call")
    span_exporter.shutdown()
    log_exporter.shutdown()


if __name__ == "__main__":
    main()
