# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What announcements cost an app at start: with no reader, with a reader of its prefix,
and with a machine-wide reader (``record --prefix '*'``), side by side in one run.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/start_cost.py

It boots the test bed and, there, times what an app does at start: construct a span and
a log exporter (registration of every tracepoint, the announcement, and the wait until a
machine-wide reader listens), each time with a new prefix, as a new service would be. The
guest is emulated (TCG): only the ratios carry over to a real machine, and the wait is
mostly the reader's own work (a rescan of tracefs), emulated too. "listened at once": the
rounds in which every tracepoint of both exporters was listened to when construction ended,
so the app's first record would be recorded.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.guest_run import run_in_guest, save_result  # noqa: E402
from opentelemetry_exporter_userevents import (  # noqa: E402
    UserEventsLogExporter,
    UserEventsSpanExporter,
)

CASES = {
    "no reader": None,
    "a reader of its prefix (--prefix P)": "named",
    "a machine-wide reader (--prefix '*')": "*",
}


def start_app(prefix: str) -> tuple[float, bool]:
    """Seconds to construct a span and a log exporter, and whether both were listened to
    when construction ended (so the app's first record would be recorded)."""
    started = time.perf_counter()
    spans, logs = UserEventsSpanExporter(prefix=prefix), UserEventsLogExporter(prefix=prefix)
    took = time.perf_counter() - started
    listened = spans.enabled and all(logs.enabled_for(n) for n in (1, 5, 9, 13, 17, 21))
    spans.shutdown()
    logs.shutdown()
    return took, listened


def _reader(prefixes: list[str], scratch: Path) -> subprocess.Popen[bytes]:
    ready = scratch / "ready"
    ready.unlink(missing_ok=True)
    args = [a for p in prefixes for a in ("--prefix", p)]
    reader = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--ready-file", str(ready), "-o", str(scratch / "out.jsonl"), *args],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (ready.exists() and ready.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return reader


def in_guest(rounds: int) -> dict[str, dict[str, float]]:
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for number, (case, how) in enumerate(CASES.items()):
            prefixes = [f"start{number}_{n}" for n in range(rounds)]
            reader = None
            if how is not None:
                reader = _reader(prefixes if how == "named" else ["*"], Path(scratch))
            try:
                start_app(f"warm{number}")
                timings = [start_app(prefix) for prefix in prefixes]
            finally:
                if reader is not None:
                    reader.terminate()
                    reader.wait(60)
            seconds = sorted(t for t, _ in timings)
            results[case] = {
                "mean_ms": statistics.fmean(seconds) * 1000,
                "median_ms": statistics.median(seconds) * 1000,
                "p90_ms": seconds[int(len(seconds) * 0.9) - 1] * 1000,
                "listened": sum(listened for _, listened in timings),
                "rounds": rounds,
            }
    return results


def report(results: dict[str, dict[str, float]], machine: str) -> str:
    base = results["no reader"]["mean_ms"]
    lines = [f"start-up cost of a span and a log exporter ({machine})", ""]
    lines.append(f"{'':40} {'mean':>10} {'median':>10} {'p90':>10} {'ratio':>7}  listened at once")
    for case, r in results.items():
        lines.append(
            f"{case:40} {r['mean_ms']:7.1f} ms {r['median_ms']:7.1f} ms {r['p90_ms']:7.1f} ms "
            f"{r['mean_ms'] / base:6.1f}x  {int(r['listened'])}/{int(r['rounds'])}"
        )

    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_guest:
        save_result("start_cost", in_guest(args.rounds))
        return 0
    code, result, machine = run_in_guest("start_cost", ["--rounds", str(args.rounds)])
    if code:
        return code
    print(report(result, machine))
    return 0


if __name__ == "__main__":
    sys.exit(main())
