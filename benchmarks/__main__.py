# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``python -m benchmarks``: the cost of a span and of a log record in each configuration,
side by side, in one run.

Runs every configuration but d (which needs user_events) on this host. Then, given kernel
images (``USER_EVENTS_KERNEL`` or ``--kernel``, separated by ``:``), boots the test bed on
each and runs every configuration there, d included: only ratios count there, as the guest
is emulated. Prints
the tables and the targets, and writes the results (JSON) and the plot (PNG, with
matplotlib: the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.configs import GUEST_KEYS, HOST_KEYS, SETUPS, keys_for, quiet
from benchmarks.measure import measure, summary
from testbed import guest

GUEST_RESULT = "guest.json"


def run_all(keys: tuple[str, ...], n: int, rounds: int, where: str) -> dict[str, Any]:
    """Both signals: ``n`` operations per timing, ``rounds`` timings per configuration."""
    quiet()
    result: dict[str, Any] = {"machine": machine(where), "n": n, "rounds": rounds}
    for signal, make in SETUPS.items():
        print(f"{where}: measuring {signal}...", file=sys.stderr, flush=True)
        result[signal] = summary(measure(make, keys_for(signal, keys), n, rounds))
    return result


def machine(where: str) -> str:
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), ""
            )
    except OSError:
        pass
    kind = "qemu TCG guest (emulated) on the host, " if where == "guest" else ""
    return (
        f"{kind}{model or platform.machine()}, {os.cpu_count()} CPUs, Linux "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def in_guest(kernel: str, n: int, rounds: int, timeout: float) -> dict[str, Any] | None:
    """Run this module's guest part in the test bed; its results, or None if it failed."""
    found: list[dict[str, Any]] = []

    def keep(share: Path) -> None:
        path = share / GUEST_RESULT
        if path.exists():
            found.append(json.loads(path.read_text()))

    argv = [
        sys.executable,
        "-m",
        "benchmarks",
        "--inside-guest",
        "-n",
        str(n),
        "--rounds",
        str(rounds),
    ]
    done = guest.run(
        kernel,
        argv,
        timeout=timeout,
        keep=keep,
        on_line=lambda line: print(f"  guest| {line}", end="", file=sys.stderr),
    )
    if done.returncode != 0 or not found:
        print(f"benchmarks: the guest run failed (exit {done.returncode})", file=sys.stderr)
        return None
    return found[0]


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--kernel",
        default=os.environ.get(guest.KERNEL_ENV),
        help=f"bzImage(s) for the test bed, separated by '{os.pathsep}' (${guest.KERNEL_ENV})",
    )
    parser.add_argument("-n", type=int, default=2000, help="operations per timing (host)")
    parser.add_argument("--rounds", type=int, default=31, help="timings per configuration (host)")
    parser.add_argument("--guest-n", type=int, default=500, help="operations per timing (guest)")
    parser.add_argument("--guest-rounds", type=int, default=21, help="(guest)")
    parser.add_argument("--timeout", type=float, default=1500, help="guest seconds")
    parser.add_argument("--json", default="build/bench/results.json", help="results file")
    parser.add_argument("--plot", default="build/bench/benchmark.png", help="PNG file")
    parser.add_argument("--report", metavar="JSON", help="report a previous run's results")
    parser.add_argument("--inside-guest", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(args)

    if options.report:
        results = json.loads(Path(options.report).read_text())
        print(report.text(results))
        if options.plot:
            report.plot(results, options.plot)
        return 0

    if options.inside_guest:
        result = run_all(GUEST_KEYS, options.n, options.rounds, "guest")
        Path(os.environ["TESTBED_SHARE"], GUEST_RESULT).write_text(json.dumps(result))
        return 0

    results: dict[str, Any] = {"host": run_all(HOST_KEYS, options.n, options.rounds, "host")}
    results["guests"] = {}
    for kernel in (options.kernel or "").split(os.pathsep) or [""]:
        reason = guest.unavailable_reason(kernel or None)
        if reason:
            print(f"benchmarks: no test bed run (d): {reason}", file=sys.stderr)
            continue
        results["guests"][os.path.basename(kernel)] = in_guest(
            kernel, options.guest_n, options.guest_rounds, options.timeout
        )
    print(report.text(results))
    Path(options.json).parent.mkdir(parents=True, exist_ok=True)
    Path(options.json).write_text(json.dumps(results, indent=1))
    if options.plot:
        Path(options.plot).parent.mkdir(parents=True, exist_ok=True)
        if not report.plot(results, options.plot):
            print("benchmarks: no plot: pip install -e '.[bench]' for matplotlib", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
