# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""How busy a service may be while ``otel-userevents record`` keeps up with it, live.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_live.py

It boots the test bed and, there, first lets one writer (tests/support/burst_writer.py:
spans of the benchmark's shape, 4 attributes and 1 event, through the exporter) write as
fast as it can while a reader records: that is the writer's own rate. Then it paces the
writer at fractions of that rate, each for about ``--seconds`` seconds with a fresh reader
(``record --prefix P -o FILE``, its default buffer), and reads from each reader's summary
how many records the kernel dropped because the reader fell behind, and the reader's
peak resident size (its workers' added). Then 2 and 4 writers
at once, each unpaced, to go past what one writer can give. It prints each step and the
highest rate held with 0 lost, as a ratio to one writer's own rate. The guest is
emulated (TCG, two vCPUs on the host's cores): the ratio carries over to a real machine
better than the rates do.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.guest_run import run_in_guest, save_result  # noqa: E402
from benchmarks.reader_memory import family, status  # noqa: E402

FRACTIONS = (0.25, 0.5, 0.75, 0.9, 1.0)
"""Of the writer's own rate, in order; the last is unpaced (as fast as it can)."""
WRITERS = (2, 4)
"""Then this many writers at once, each unpaced: more than one writer can give."""


def _reader(directory: Path, prefix: str) -> tuple[subprocess.Popen[str], Path]:
    ready, output = directory / f"ready-{prefix}", directory / f"out-{prefix}"
    process = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--prefix", prefix, "--ready-file", str(ready), "-o", str(output)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (ready.exists() and ready.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return process, output


def _spans_in(output: Path) -> int:
    if not output.exists():
        return 0
    count = 0
    for line in output.read_text().splitlines():
        request = json.loads(line)
        for resource in request.get("resourceSpans", ()):
            for scope in resource.get("scopeSpans", ()):
                count += len(scope.get("spans", ()))
    return count


def step(directory: Path, prefix: str, count: int, rate: float, writers: int = 1) -> dict[str, Any]:
    """``writers`` writers at once, ``count`` spans each at ``rate``/s each (0: unpaced),
    one fresh reader."""
    reader, output = _reader(directory, prefix)
    command = [sys.executable, "-m", "tests.support.burst_writer", prefix, str(count), str(rate)]
    running = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=ROOT)
        for _ in range(writers)
    ]  # fmt: skip
    wrote = []
    for writer in running:
        out, err = writer.communicate(timeout=1800)
        if writer.returncode != 0:
            raise RuntimeError(f"a writer failed: {err[-2000:]}")
        wrote.append(json.loads(out))
    last, since = -1, time.monotonic()
    while time.monotonic() - since < 3:  # until the output stops growing for 3 s
        now = _spans_in(output)
        if now != last:
            last, since = now, time.monotonic()
        time.sleep(0.25)
    peak = _peak_kib(reader.pid)
    reader.send_signal(signal.SIGINT)
    _, err = reader.communicate(timeout=300)
    summary = re.search(r"(\d+) records in .*?, lost (\d+)", err)
    if summary is None:
        raise RuntimeError(f"no summary from the reader: {err[-2000:]}")
    return {
        "asked": rate * writers,
        "writers": writers,
        # the writers' spans over the longest writer's time: their rate together
        "rate": count * writers / max(w["elapsed"] for w in wrote),
        "spans": count * writers,
        "written": sum(w["stats"]["written"] for w in wrote),
        "read": int(summary[1]),
        "lost": int(summary[2]),
        "rebuilt": _spans_in(output),
        "reader_peak_kib": peak,
    }


def _peak_kib(pid: int) -> int:
    """The reader's peak resident size (``VmHWM``) and its workers', summed, in KiB."""
    return sum(status(each, "VmHWM") for each in family(pid))


def in_guest(seconds: float) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp())
    own = step(directory, "live_own", 2000, 0)
    steps = []
    for number, fraction in enumerate(FRACTIONS):
        rate = own["rate"] * fraction if fraction < 1 else 0
        count = max(500, int(own["rate"] * fraction * seconds))
        steps.append(step(directory, f"live_{number}", count, rate))
    for writers in WRITERS:
        count = max(500, int(own["rate"] * seconds))
        steps.append(step(directory, f"live_w{writers}", count, 0, writers))
    return {"own": own, "steps": steps}


def report(result: dict[str, Any], machine: str) -> str:
    """The steps, and the highest rate held with 0 lost as a ratio to one writer's own rate:
    that of the one writer unpaced while a reader records (the warm-up run only chose the
    paces: an emulated guest's rates drift from one run to the next)."""
    steps = result["steps"]
    own = next(s["rate"] for s in steps if s["asked"] == 0 and s.get("writers", 1) == 1)
    lines = [
        f"live: one writer paced, then writers unpaced, a fresh reader each ({machine})",
        f"one writer's own rate (unpaced, a reader recording): {own:,.0f} spans/s; the paces "
        f"are fractions of a warm-up run's {result['own']['rate']:,.0f} spans/s",
        "",
        f"{'asked':>16} {'achieved':>12} {'of own':>7} {'written':>9} {'read':>9} {'lost':>7}"
        f" {'reader peak':>12}",
    ]
    held = 0.0
    for s in steps:
        writers = s.get("writers", 1)
        asked = f"{s['asked']:,.0f}/s" if s["asked"] else "unpaced"
        if writers > 1:
            asked = f"{writers} x {asked}"
        lines.append(
            f"{asked:>16} {s['rate']:>10,.0f}/s {s['rate'] / own:>6.0%} {s['written']:>9,} "
            f"{s['read']:>9,} {s['lost']:>7,} {s.get('reader_peak_kib', 0) / 1024:>8.0f} MiB"
        )
        if s["lost"] == 0:
            held = max(held, s["rate"])
    lines.append("")
    lines.append(
        f"highest writer rate held with 0 lost: {held:,.0f} spans/s, "
        f"{held / own:.2f}x one writer's own rate"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each step")
    parser.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_guest:
        save_result("reader_live", in_guest(args.seconds))
        return 0
    code, result, machine = run_in_guest(
        "reader_live", ["--seconds", str(args.seconds)], timeout=3600
    )
    if code:
        return code
    print(report(result, machine))
    return 0


if __name__ == "__main__":
    sys.exit(main())
