# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What ``record --kernel sched,syscalls`` costs, side by side with the same reader without
``--kernel`` and with an earlier commit's ``--kernel`` (``--baseline``), in one run: the
app's time per listened span, and the reader's CPU time per span rebuilt.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/kernel_view_cost.py

It boots the test bed and, there, starts one app process (spans of the benchmark's shape, 4
attributes and 1 event, ended on its main thread through ``UserEventsSpanProcessor``) that
lives through every round, pinned to CPU 0 (the reader and this script on CPU 1, so that the
reader's work is not timed as the app's). Each round starts three fresh ``record --prefix P
--workers 1``: without ``--kernel``, with ``--kernel sched,syscalls``, and with it from the
baseline commit (a git worktree beside the checkout, imported first by the same Python, as
``benchmarks/reader_start.py`` does), the order rotating from round to round, so the three
are interleaved: the kernel's tracepoints are enabled only while a ``--kernel``
reader runs, and they fire in the app's threads (its ``writev`` of each record is a
syscall). In each round the app writes a warm-up, waits until it is rebuilt, then blocks of
spans of two shapes, alternating: ``plain`` (no syscall of its own) and ``5 preads`` (five
``os.pread`` of a tmpfs file in the span). Each block is timed in the app; before the next,
the reader's CPU time (utime + stime of ``/proc/PID/stat``) is read once the block's spans
are all in its output, so it holds the block's kernel events too (and its idle polls while
the block is written and waited for). Figures: the median of the blocks' µs per span, and
the reader's CPU per span summed over the blocks; kernel events per span rebuilt from the
reader's summary line. What ``--kernel`` adds to the reader's CPU per span is each
``--kernel`` reader's less the reader's without it; the report gives it for this tree and
the baseline, and their ratio. The guest is emulated (TCG, 2 vCPUs on the host's cores) and its
clock may be jiffies (see :data:`BOOTS`: it boots again, and prints the clock source), so
blocks are long: only the ratios carry over to a real machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

from benchmarks.guest_run import run_in_guest, save_result  # noqa: E402
from benchmarks.reader_start import _tree  # noqa: E402
from opentelemetry_exporter_userevents import (  # noqa: E402
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)

PREFIX = "kvcost"
MODES = {"off": [], "on": ["--kernel", "sched,syscalls"], "base": ["--kernel", "sched,syscalls"]}
"""The reader's arguments beyond ``record --prefix P --workers 1``; ``base`` runs the
baseline commit's reader."""
BASELINE = "5e51342"
"""The commit whose ``--kernel`` this tree's is compared with: main before the kernel view
was made cheaper per span."""
SHAPES = {"plain": 0, "5 preads": 5}
"""Each span shape, and the ``os.pread`` calls in each span of it."""
WARM_UP = 300
PROBE = 3000
"""At each round's end, after its figures, the app times this many ``os.pread`` alone (no
span): a syscall's own cost with and without ``--kernel``. Its 2 events each (enter, exit)
are taken off the round's kernel events count."""
BOOTS = 4
"""Boots tried for a guest with a TSC clock source; the last runs on whatever it has. Under
a loaded host the guest's TSC calibration can fail: its clock is then jiffies (4 ms steps),
which the vDSO cannot read, so every clock read of the app is a syscall (traced with
``--kernel``) and span times share 4 ms steps with their neighbours'."""
_KERNEL = re.compile(r"kernel view of (\d+) spans \((\d+) partial.*? from (\d+) kernel events")
_RECORDS = re.compile(r"(\d+) records in [\d.]+ s")
_LOST = re.compile(r"(\d+) kernel events lost")


def app() -> None:
    """The app: reads ``READS COUNT`` lines, writes COUNT spans with READS preads each, and
    answers with the time they took."""
    exporter = UserEventsSpanExporter(prefix=PREFIX)
    provider = TracerProvider(resource=Resource({"service.name": "kernel-view-cost"}))
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    tracer = provider.get_tracer("kernel.view.cost", "1.0")
    with tempfile.TemporaryFile() as file:
        file.write(b"x" * 4096)
        file.flush()
        fd = file.fileno()
        print(json.dumps({"pid": os.getpid()}), flush=True)
        for line in sys.stdin:
            reads, count = map(int, line.split())
            while not exporter.enabled:  # a new reader: wait until it listens
                time.sleep(0.01)
            started = time.perf_counter_ns()
            if reads < 0:  # the probe: preads alone, no span
                for _ in range(count):
                    os.pread(fd, 64, 0)
                print(json.dumps({"ns": time.perf_counter_ns() - started}), flush=True)
                continue
            for number in range(count):
                with tracer.start_as_current_span(
                    "GET /cart/{id}",
                    attributes={"http.request.method": "GET", "url.path": f"/cart/{number}",
                                "http.response.status_code": 200, "user.id": number},
                ) as span:  # fmt: skip
                    for _ in range(reads):
                        os.pread(fd, 64, 0)
                    span.add_event("cart loaded", {"items": number % 5})
            took = time.perf_counter_ns() - started
            print(json.dumps({"ns": took, "stats": exporter.stats.snapshot()}), flush=True)
    provider.shutdown()


class _Output:
    """The reader's OTLP/JSON output, read as it grows: spans so far, by kernel view, and
    with ``--kernel`` what their views hold, by shape (a span with ``pread64`` in its top
    syscalls is of ``5 preads``): spans, syscalls, context switches."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.spans = path, 0, 0
        self.views: dict[str, int] = {}
        self.held = {shape: [0, 0, 0] for shape in SHAPES}
        self.top: dict[str, dict[str, int]] = {}
        """The last whole view's top syscalls (name: count), by shape."""

    def count(self) -> int:
        if self.path.exists():
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
            end = data.rfind(b"\n") + 1
            self.offset += end
            for line in data[:end].splitlines():
                for resource in json.loads(line).get("resourceSpans", ()):
                    for scope in resource.get("scopeSpans", ()):
                        for span in scope.get("spans", ()):
                            self.add(span)
        return self.spans

    def add(self, span: dict[str, Any]) -> None:
        self.spans += 1
        got = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
        view = got.get("linux.kernel.view", "-")
        self.views[view] = self.views.get(view, 0) + 1
        if view == "whole":
            top = [v["stringValue"] for v in got.get("linux.syscall.top.name", {}).get(
                "values", ())]  # fmt: skip
            shape = "5 preads" if "pread64" in top else "plain"
            counts = got.get("linux.syscall.top.count", {}).get("values", ())
            self.top[shape] = {n: int(c["intValue"]) for n, c in zip(top, counts, strict=True)}
            held = self.held[shape]
            held[0] += 1
            held[1] += int(got["linux.syscall.count"])
            held[2] += sum(int(got[f"linux.sched.switches.{kind}"])
                           for kind in ("voluntary", "involuntary"))  # fmt: skip

    def wait(self, spans: int, seconds: float = 180) -> bool:
        deadline = time.monotonic() + seconds
        while self.count() < spans:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


def _cpu(pid: int) -> float:
    """utime + stime of ``pid``, in seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _round(
    directory: Path,
    number: int,
    mode: str,
    blocks: int,
    block: int,
    app_process: Any,
    tree: Path = ROOT,
) -> dict[str, Any]:
    """One reader (of ``tree``), ``blocks`` blocks of each shape; their times and the
    reader's CPU."""
    ready, out = directory / f"ready{number}{mode}", directory / f"out{number}{mode}.jsonl"
    reader = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--prefix", PREFIX, "--workers", "1", "--ready-file", str(ready), "-o", str(out),
         *MODES[mode]],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )  # fmt: skip
    _pin(reader.pid, 1)
    deadline = time.monotonic() + 180
    while not (ready.exists() and ready.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    output, expected = _Output(out), 0

    def run(shape: str, count: int) -> dict[str, Any]:
        nonlocal expected
        app_process.stdin.write(f"{SHAPES[shape]} {count}\n")
        app_process.stdin.flush()
        answer: dict[str, Any] = json.loads(app_process.stdout.readline())
        expected += count
        answer["rebuilt"] = output.wait(expected)
        return answer

    for shape in SHAPES:
        run(shape, WARM_UP // len(SHAPES))
    warm_views, warm_held = dict(output.views), {k: list(v) for k, v in output.held.items()}
    result: dict[str, Any] = {"mode": mode, "us_per_span": {s: [] for s in SHAPES},
                              "reader_cpu_s": dict.fromkeys(SHAPES, 0.0),
                              "spans": dict.fromkeys(SHAPES, 0), "missing": 0}  # fmt: skip
    for index in range(blocks):
        for shape in list(SHAPES)[:: 1 if (index + number) % 2 == 0 else -1]:
            before = _cpu(reader.pid)
            answer = run(shape, block)
            result["reader_cpu_s"][shape] += _cpu(reader.pid) - before
            result["us_per_span"][shape].append(answer["ns"] / block / 1000)
            result["spans"][shape] += block
            result["missing"] += not answer["rebuilt"]
    result["not_listened"] = answer["stats"]["not_listened"]
    app_process.stdin.write(f"-1 {PROBE}\n")  # after the last CPU read
    app_process.stdin.flush()
    result["pread_us"] = json.loads(app_process.stdout.readline())["ns"] / PROBE / 1000
    reader.send_signal(signal.SIGTERM)
    err = reader.communicate(timeout=120)[1]
    summary = next((ln for ln in err.splitlines() if "stopped (" in ln), err[-400:])
    result["summary"] = summary
    result["clock"] = next((ln for ln in err.splitlines() if "clock checks" in ln), "")
    kernel, records = _KERNEL.search(summary), _RECORDS.search(summary)
    lost = _LOST.search(summary)
    result["records"] = int(records[1]) if records else 0
    result["kernel_events"] = int(kernel[3]) - 2 * PROBE if kernel else 0  # less the probe's
    result["kernel_events_lost"] = int(lost[1]) if lost else 0
    result["spans_rebuilt"] = output.count()
    result["top_syscalls"] = output.top
    result["views"] = {k: v - warm_views.get(k, 0) for k, v in output.views.items()}
    result["held"] = {shape: [n - w for n, w in zip(held, warm_held[shape], strict=True)]
                      for shape, held in output.held.items()}  # fmt: skip
    return result


def _pin(pid: int, cpu: int) -> None:
    """Keep ``pid`` on ``cpu`` (when the guest has it): the app on 0, the reader on 1."""
    if cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(pid, {cpu})


def _clock_messages() -> list[str]:
    """The guest kernel's messages about its clock sources (why it has no TSC, if not)."""
    try:
        text = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [ln for ln in text.splitlines() if re.search(r"(?i)clocksource|tsc", ln)][-8:]


def _clocksource() -> str:
    path = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    resolution = time.clock_getres(time.CLOCK_MONOTONIC) * 1e6
    return f"{path.read_text().strip()} ({resolution:g} µs)"


def in_guest(
    rounds: int, blocks: int, block: int, any_clock: bool, baseline: Path
) -> dict[str, Any]:
    clocksource = _clocksource()
    if "jiffies" in clocksource and not any_clock:
        return {"retry": clocksource, "clock_messages": _clock_messages()}
    directory = Path(tempfile.mkdtemp())
    env = {**os.environ, "TMPDIR": str(directory)}
    app_process = subprocess.Popen(
        [sys.executable, __file__, "--app"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    assert app_process.stdout is not None and app_process.stdin is not None
    json.loads(app_process.stdout.readline())
    _pin(app_process.pid, 0)
    _pin(os.getpid(), 1)
    results = []
    try:
        modes = list(MODES)
        for number in range(rounds):
            for mode in modes[number % 3 :] + modes[: number % 3]:  # rotating
                tree = baseline if mode == "base" else ROOT
                results.append(_round(directory, number, mode, blocks, block, app_process, tree))
    finally:
        app_process.stdin.close()
        app_process.wait(60)
    return {"rounds": results, "block": block, "blocks": blocks, "cpus": os.cpu_count(),
            "clocksource": [clocksource, _clocksource()],
            "clock_messages": _clock_messages()}  # fmt: skip


def figures(result: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Per mode and shape: median µs per span, the reader's CPU µs per span; per mode,
    kernel events per span rebuilt."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for mode in MODES:
        rounds = [r for r in result["rounds"] if r["mode"] == mode]
        if not rounds:  # a run without the baseline's readers
            continue
        rebuilt = sum(r["spans_rebuilt"] for r in rounds)
        out[mode] = {}
        for shape in SHAPES:
            times = [t for r in rounds for t in r["us_per_span"][shape]]
            spans = sum(r["spans"][shape] for r in rounds)
            quartiles = statistics.quantiles(times, n=4) if len(times) > 1 else times * 3
            out[mode][shape] = {
                "app_us": statistics.median(times),
                "app_us_q1": quartiles[0],
                "app_us_q3": quartiles[2],
                "reader_cpu_us": sum(r["reader_cpu_s"][shape] for r in rounds) / spans * 1e6,
                "spans": spans,
            }
        out[mode]["all"] = {
            "kernel_events_per_span": sum(r["kernel_events"] for r in rounds) / rebuilt,
            "kernel_events": sum(r["kernel_events"] for r in rounds),
            "kernel_events_lost": sum(r["kernel_events_lost"] for r in rounds),
            "missing_blocks": sum(r["missing"] for r in rounds),
            "not_listened": sum(r["not_listened"] for r in rounds),
            "spans_rebuilt": rebuilt,
        }
    return out


def report(result: dict[str, Any], machine: str) -> str:
    f = figures(result)
    baseline = result.get("baseline", "baseline")
    lines = [
        f"record --kernel sched,syscalls against record, {machine}; {len(result['rounds'])} "
        f"readers interleaved, {result['blocks']} blocks of {result['block']} spans per shape "
        "each",
        "",
        f"{'span':10} {'reader':17} {'app µs/span':>12} {'(blocks q1-q3)':>15} {'× off':>6} "
        f"{'reader CPU µs/span':>19} {'× off':>6}",
    ]
    for shape in SHAPES:
        off = f["off"][shape]
        for mode, label in (("off", "record"), ("base", f"--kernel {baseline}"),
                            ("on", "record --kernel")):  # fmt: skip
            if mode not in f:
                continue
            r = f[mode][shape]
            lines.append(
                f"{shape:10} {label:17} {r['app_us']:12.1f} "
                f"{r['app_us_q1']:7.0f}-{r['app_us_q3']:<7.0f} {r['app_us'] / off['app_us']:6.2f} "
                f"{r['reader_cpu_us']:19.1f} {r['reader_cpu_us'] / off['reader_cpu_us']:6.2f}"
            )
    lines.append("")
    for shape in SHAPES:
        off, on = f["off"][shape], f["on"][shape]
        lines.append(
            f"{shape}: the app {on['app_us'] - off['app_us']:+.1f} µs per span "
            f"(×{on['app_us'] / off['app_us']:.2f}); the reader "
            f"{on['reader_cpu_us'] - off['reader_cpu_us']:+.1f} µs CPU per span "
            f"(×{on['reader_cpu_us'] / off['reader_cpu_us']:.2f})"
        )
    if "base" in f:
        lines.append("")
        for shape in SHAPES:
            cpu = {mode: f[mode][shape]["reader_cpu_us"] for mode in ("off", "on", "base")}
            now, then = cpu["on"] - cpu["off"], cpu["base"] - cpu["off"]
            lines.append(
                f"{shape}: --kernel adds {now:.1f} µs of the reader's CPU per span "
                f"({then:.1f} µs at {baseline}): ×{now / then:.2f} of the baseline's added cost"
            )
    probe = {mode: statistics.median(r["pread_us"] for r in result["rounds"] if r["mode"] == mode)
             for mode in MODES if mode in f
             and all("pread_us" in r for r in result["rounds"])}  # fmt: skip
    if probe:
        lines.append(
            f"an os.pread alone in the app ({PROBE} per round, median of rounds): "
            f"{probe['off']:.2f} µs with record, {probe['on']:.2f} µs with record --kernel "
            f"({probe['on'] - probe['off']:+.2f} µs per syscall traced)"
        )
    on = f["on"]["all"]
    lines.append(
        f"kernel events: {on['kernel_events']} for {on['spans_rebuilt']} spans rebuilt "
        f"({on['kernel_events_per_span']:.1f} per span, both shapes and the warm-ups), "
        f"{on['kernel_events_lost']} lost"
    )
    tops: dict[str, Any] = {}
    for r in result["rounds"]:
        tops.update(r.get("top_syscalls", {}))
    for shape in SHAPES:
        held = [sum(r["held"][shape][i] for r in result["rounds"] if r["mode"] == "on")
                for i in range(3)]  # fmt: skip
        if held[0]:
            lines.append(
                f"{shape}, with --kernel: {held[1] / held[0]:.1f} syscalls and "
                f"{held[2] / held[0]:.2f} context switches per span in its kernel view "
                f"({held[0]} whole views); the last one's top syscalls: {tops.get(shape, {})}"
            )
    problems = [
        f"{mode}: {f[mode]['all'][key]} {key.replace('_', ' ')}"
        for mode in MODES
        for key in ("missing_blocks", "not_listened")
        if mode in f and f[mode]["all"][key]
    ]
    views: dict[str, int] = {}
    for r in result["rounds"]:
        if r["mode"] == "on":
            for view, count in r["views"].items():
                views[view] = views.get(view, 0) + count
    lines.append(f"kernel view of the spans after the warm-ups, with --kernel: {views}")
    lines.append(f"guest clock source, at start and end: {', '.join(result['clocksource'])}")
    lines += [f"  {line}" for line in result.get("clock_messages", ())]
    lines.append(f"clock: {result['rounds'][0]['clock'] or result['rounds'][1]['clock']}")
    lines.append("problems: " + ("; ".join(problems) if problems else "none"))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="per mode (default 5)")
    parser.add_argument("--blocks", type=int, default=3, help="per shape per round (3)")
    parser.add_argument("--block", type=int, default=300, help="spans per block (300)")
    parser.add_argument("--json", default=str(ROOT / "build" / "bench" / "kernel_view_cost.json"))
    parser.add_argument("--report", metavar="FILE", help="print a result written before")
    parser.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--app", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--any-clock", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", default=BASELINE, help="a commit (default %(default)s)")
    parser.add_argument("--baseline-tree", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.app:
        app()
        return 0
    if args.in_guest:
        tree = Path(args.baseline_tree)
        result = in_guest(args.rounds, args.blocks, args.block, args.any_clock, tree)
        save_result("kernel_view_cost", result)
        return 0
    if args.report:
        result = json.loads(Path(args.report).read_text())
        print(report(result, result.get("machine", "")))
        return 0
    sizes = ["--rounds", str(args.rounds), "--blocks", str(args.blocks), "--block", str(args.block),
             "--baseline-tree", str(_tree(args.baseline))]  # fmt: skip
    for boot in range(BOOTS):
        last = ["--any-clock"] if boot == BOOTS - 1 else []
        code, result, machine = run_in_guest("kernel_view_cost", sizes + last)
        if code:
            return code
        if "retry" not in result:
            break
        print(f"boot {boot + 1}: the guest's clock is {result['retry']} (its TSC could not be "
              "calibrated): booting again", file=sys.stderr)  # fmt: skip
    result["machine"] = machine
    result["baseline"] = args.baseline
    result["figures"] = figures(result)
    print(report(result, machine))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
