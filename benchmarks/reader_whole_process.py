# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What a user gets: ``otel-userevents decode`` as a whole process, start-up included, on a
capture whose attribute values all differ, against ``trace-cmd report`` and ``perf script``
over the same records; and the live reader's CPU per span beside ``trace-cmd record``'s.

    USER_EVENTS_KERNEL=../shared/kernel/bzImage-no-multi-format \\
        .venv/bin/python benchmarks/reader_whole_process.py [--spans 100000] [--runs 3]

It boots the test bed once (``benchmarks/reader_whole_guest.py``) for a trace.dat made by
``record --capture`` and a perf.data made by ``perf record -a`` of the same app's records
(single-format, which both tools parse), and keeps them in ``--cache`` (outside the tree;
reused while there). Then, on the host, each command runs as a whole process in turn with
its yardstick, A B A B (a warm-up pair first), ``--runs`` pairs: wall clock from start to
reaped, CPU (user + system) and peak resident size from ``wait4``. Medians; ratios are the
median of the pairs' ratios, which holds when the host's speed drifts. ``--live RATE``
also boots the test bed for the live reader at a paced rate (``--live-spans``). It prints
each target of issue 34 as met, or missed by how much. ``--baseline-tree TREE`` times
another checkout's ``decode`` (an earlier commit's: ``git worktree add TREE COMMIT``) in
turn with this tree's, one and two workers, as ratios from one run. ``--compiled-tree
TREE`` adds the compiled build's ``decode`` from TREE (a checkout with the compiled
wheel's extension modules beside the sources, as docs/building.md makes it) against the
tool and against this tree's, in turn.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testbed import guest  # noqa: E402

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "otel-userevents-bench"
"""Where captures are kept between runs: outside the tree, keyed by span count."""
DECODE = [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "decode"]
"""``otel-userevents decode`` of this tree (``-m`` from its root, not an installed script)."""
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""As a user's: bytecode cached (the warm-up run writes it, as an install does)."""


def in_guest(what: str, args: list[str], keep: list[str], into: Path) -> dict[str, Any]:
    """Run ``reader_whole_guest.py WHAT ARGS`` in the test bed; copy ``keep`` into ``into``;
    its ``WHAT.json``."""
    kernel = os.environ.get(guest.KERNEL_ENV)
    reason = guest.unavailable_reason(kernel)
    if reason is not None or kernel is None:
        raise SystemExit(f"reader_whole_process: {reason}")
    into.mkdir(parents=True, exist_ok=True)

    def copy(share: Path) -> None:
        for name in [*keep, f"{what}.json"]:
            if (share / name).exists():
                shutil.copy(share / name, into / name)

    script = str(ROOT / "benchmarks" / "reader_whole_guest.py")
    run = guest.run(kernel, [sys.executable, script, what, *args], cwd=ROOT, keep=copy,
                    timeout=3600, memory_mb=2048)  # fmt: skip
    if not (into / f"{what}.json").exists():
        raise SystemExit(f"reader_whole_process: no result from the guest\n{run.console[-3000:]}")
    result: dict[str, Any] = json.loads((into / f"{what}.json").read_text())
    result["kernel"] = Path(kernel).name
    return result


def capture(spans: int, cache: Path) -> Path:
    """The directory holding ``cap.dat`` and ``perf.data`` of ``spans`` spans, made if absent."""
    directory = cache / f"distinct-{spans}"
    if not (directory / "capture.json").exists():
        print(f"making the capture in the test bed into {directory}", file=sys.stderr)
        in_guest("capture", [str(spans)], ["cap.dat", "perf.data"], directory)
    return directory


def run(argv: list[str], cwd: Path = ROOT) -> dict[str, float]:
    """One whole process, output to /dev/null: wall s, CPU s, peak RSS MiB. Run in ``cwd``,
    ``decode`` imports that tree's package (``-m`` puts it first on the path)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=ENV
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} exited {os.waitstatus_to_exitcode(status)}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024}


def in_turn(a: list[str], b: list[str], runs: int, a_in: Path = ROOT) -> dict[str, Any]:
    """A (run in ``a_in``) and B in turn, a warm-up pair first: each one's medians, and the
    medians of the pairs' A/B ratios."""
    run(a, a_in), run(b)
    pairs = [(run(a, a_in), run(b)) for _ in range(runs)]
    figures: dict[str, Any] = {"runs": runs}
    for side, index in (("a", 0), ("b", 1)):
        for field in ("wall", "cpu", "rss"):
            figures[f"{side}_{field}"] = statistics.median(p[index][field] for p in pairs)
        figures[f"{side}_wall_spread"] = [min(p[index]["wall"] for p in pairs),
                                          max(p[index]["wall"] for p in pairs)]  # fmt: skip
    for field in ("wall", "cpu"):
        figures[f"{field}_ratio"] = statistics.median(p[0][field] / p[1][field] for p in pairs)
    return figures


def counted(argv: list[str], pattern: str, stream: str) -> int:
    """What ``argv`` counted: the first group of ``pattern`` in its stderr, or its stdout's
    lines matching it (streamed: a parent that grew would raise its children's peak, which
    the kernel counts from before exec)."""
    if stream == "lines":
        with subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            errors="replace",
            cwd=ROOT,
            env=ENV,
        ) as process:
            assert process.stdout is not None
            return sum(1 for line in process.stdout if re.search(pattern, line))
    done = subprocess.run(argv, capture_output=True, text=True, errors="replace", cwd=ROOT, env=ENV)
    found = re.search(pattern, done.stderr)
    return int(found[1]) if found else 0


def measure(
    directory: Path, runs: int, out: Path, compiled: Path | None, baseline: Path | None = None
) -> dict[str, Any]:
    cap, data = directory / "cap.dat", directory / "perf.data"
    trace_cmd, perf = shutil.which("trace-cmd") or "trace-cmd", shutil.which("perf") or "perf"
    tools = {
        "trace-cmd report": (cap, [trace_cmd, "report", "-i", str(cap)]),
        "perf script": (data, [perf, "script", "-f", "-i", str(data)]),
    }
    figures: dict[str, Any] = {"capture": json.loads((directory / "capture.json").read_text())}
    figures["rss_floor_mib"] = run(["true"])["rss"]  # a child's peak cannot read below it
    for name, (file, tool) in tools.items():
        if not file.exists():
            continue
        row: dict[str, Any] = {"file_mib": file.stat().st_size / 1048576}
        row["tool_records"] = counted(tool, r"bench_span", "lines")
        for workers in (1, 2):
            decode = [*DECODE, str(file), "--format", "otlp-json", "-o", str(out),
                      "--workers", str(workers)]  # fmt: skip
            row["spans"] = counted(decode, r"(\d+) spans and \d+ logs rebuilt", "stderr")
            print(f"{name}: decode --workers {workers} vs the tool...", file=sys.stderr)
            row[f"workers_{workers}"] = in_turn(decode, tool, runs)
            if baseline is not None:
                print(f"{name}: decode --workers {workers}, {baseline} vs this tree",
                      file=sys.stderr)  # fmt: skip
                row[f"baseline_vs_this_{workers}"] = in_turn(decode, decode, runs, baseline)
            if compiled is not None and workers == 1:
                print(f"{name}: the compiled build's decode vs the tool, vs pure", file=sys.stderr)
                row["compiled_vs_tool"] = in_turn(decode, tool, runs, compiled)
                row["compiled_vs_pure"] = in_turn(decode, decode, runs, compiled)
        figures[name] = row
    out.unlink(missing_ok=True)
    return figures


def report(figures: dict[str, Any]) -> list[str]:
    lines = [f"(peak resident sizes read no lower than {figures['rss_floor_mib']:.0f} MiB here)"]
    for name in ("trace-cmd report", "perf script"):
        row = figures.get(name)
        if row is None:
            continue
        spans = row["spans"]
        lines.append(
            f"{name} over the same file ({row['file_mib']:.1f} MiB, it printed "
            f"{row['tool_records']:,} span records; decode rebuilt {spans:,})"
        )
        tool = row["workers_1"]
        lines.append(f"  {name:<22} wall {tool['b_wall']:6.2f} s  CPU {tool['b_cpu']:6.2f} s  "
                     f"peak {tool['b_rss']:5.0f} MiB  {row['tool_records'] / tool['b_cpu']:9,.0f} "
                     f"records/CPU-s")  # fmt: skip
        rows = [("--workers 1", row["workers_1"]), ("--workers 2", row["workers_2"])]
        if "compiled_vs_tool" in row:
            rows.append(("compiled, 1 worker", row["compiled_vs_tool"]))
        for label, f in rows:
            lines.append(
                f"  decode {label:<18} wall {f['a_wall']:6.2f} s  CPU "
                f"{f['a_cpu']:6.2f} s  peak {f['a_rss']:5.0f} MiB  {spans / f['a_cpu']:9,.0f} "
                f"spans/CPU-s  {spans / f['a_wall']:9,.0f} spans/s  = {f['wall_ratio']:.2f}x "
                f"the tool's wall, {f['cpu_ratio']:.2f}x its CPU (median of {f['runs']} pairs)"
            )
        for workers in (1, 2):
            other = row.get(f"baseline_vs_this_{workers}")
            if other:
                lines.append(
                    f"  {figures['baseline']} / this tree, decode --workers {workers}: CPU "
                    f"{other['cpu_ratio']:.2f}x, wall {other['wall_ratio']:.2f}x, peak "
                    f"{other['a_rss']:.0f} / {other['b_rss']:.0f} MiB (median of "
                    f"{other['runs']} pairs in turn)"
                )
        both = row.get("compiled_vs_pure")
        if both:
            lines.append(
                f"  compiled build / pure build, decode --workers 1: CPU {both['cpu_ratio']:.2f}x, "
                f"wall {both['wall_ratio']:.2f}x (median of {both['runs']} pairs in turn)"
            )
    return lines


def _verdict(name: str, value: float, bound: float, above: bool) -> str:
    """``value`` against ``bound`` (at least it if ``above``, else at most): met, or by how
    much it is missed, as a ratio to the bound."""
    if value >= bound if above else value <= bound:
        how = "met"
    else:
        how = f"missed: {value / bound:.2f}x the bound"
    return f"{name}: {value:,.2f} ({'>=' if above else '<='} {bound:,}): {how}"


def targets(figures: dict[str, Any]) -> list[str]:
    """Issue 34's three targets, as ratios from this run."""
    row = figures.get("trace-cmd report")
    if row is None:
        return ["targets: not measured (no trace-cmd)"]
    one, two = row["workers_1"], row["workers_2"]
    cpus = len(os.sched_getaffinity(0))
    compiled = row.get("compiled_vs_tool")
    built = [] if compiled is None else [
        _verdict("compiled build: decode CPU / trace-cmd report CPU", compiled["cpu_ratio"], 2,
                 False),
        _verdict("compiled build: spans per CPU-second, one worker",
                 row["spans"] / compiled["a_cpu"], 40000, True),
    ]  # fmt: skip
    return [*built,
        _verdict("decode CPU / trace-cmd report CPU, whole processes", one["cpu_ratio"], 2, False),
        _verdict("spans per CPU-second, decode --workers 1 end to end", row["spans"] / one["a_cpu"],
                 40000, True),  # fmt: skip
        _verdict(f"--workers 2 speed / --workers 1 speed (wall; {cpus} CPUs here)",
                 (one["a_wall"] / one["b_wall"]) / (two["a_wall"] / two["b_wall"]), 1.7, True),
    ]  # fmt: skip


def live_report(result: dict[str, Any]) -> list[str]:
    """CPU a span for each listener, gross and less what it costs idle over the window."""
    spans, window = result["spans"], result["window_s"]
    line = (f"live ({result['kernel']}, emulated guest): {spans:,} spans at "
            f"{spans / result['elapsed']:,.0f}/s;")  # fmt: skip
    net = {}
    for name, label in (("reader", "record -o /dev/null"), ("tool", "trace-cmd record")):
        cpu = result["cpu_s"][name]
        net[name] = max(cpu - result["idle_cpu_per_s"][name] * window, 0.0)
        line += (f" {label}: {cpu:.2f} CPU-s = {cpu * 1e6 / spans:,.0f} us a span "
                 f"({net[name] * 1e6 / spans:,.0f} less idle);")  # fmt: skip
    ratio = result["cpu_s"]["reader"] / max(result["cpu_s"]["tool"], 0.01)
    return [line + f" record/trace-cmd record CPU {ratio:.0f}x"]


def plot(figures: dict[str, Any], path: Path) -> bool:
    """CPU seconds of each command over the same records, the tool's beside decode's in each
    build, with the 2x target; False without matplotlib."""
    try:
        import matplotlib  # noqa: PLC0415 - optional (the bench extra)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    tools = [name for name in ("trace-cmd report", "perf script") if name in figures]
    figure, axes = plt.subplots(1, len(tools), figsize=(7 * len(tools), 4), squeeze=False,
                                constrained_layout=True)  # fmt: skip
    for ax, name in zip(axes[0], tools, strict=True):
        row = figures[name]
        bars = [(name, row["workers_1"]["b_cpu"], "#9a9a9a")]
        bars += [(f"decode --workers {n}", row[f"workers_{n}"]["a_cpu"], "#c44e52")
                 for n in (1, 2)]  # fmt: skip
        if "compiled_vs_tool" in row:
            bars.append(
                ("decode --workers 1, compiled", row["compiled_vs_tool"]["a_cpu"], "#4c72b0")
            )
        tool_cpu = bars[0][1]
        ys = range(len(bars))
        ax.barh(list(ys), [b[1] for b in bars], color=[b[2] for b in bars])
        for y, (_, cpu, _) in zip(ys, bars, strict=True):
            ax.text(cpu, y, f" {cpu:.2f} s ({cpu / tool_cpu:.1f}x)", va="center", fontsize=8)
        ax.axvline(2 * tool_cpu, color="#4c72b0", linestyle="--", linewidth=0.8)
        ax.set_yticks(list(ys), [b[0] for b in bars])
        ax.invert_yaxis()
        ax.margins(x=0.25)
        ax.set_title(f"{row['spans']:,} spans, CPU seconds (target: 2x {name}, dashed)",
                     fontsize=10)  # fmt: skip
    figure.suptitle("otel-userevents decode as a whole process, beside the tools' own readers")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100000)
    parser.add_argument("--runs", type=int, default=3, help="pairs, after a warm-up pair")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--live", type=float, metavar="RATE", help="also: live at RATE spans/s")
    parser.add_argument("--live-spans", type=int, default=6000)
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument(
        "--compiled-tree", type=Path, metavar="TREE", help="also the compiled build's decode"
    )
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        metavar="TREE",
        help="also another checkout's decode (an earlier commit's), in turn with this tree's",
    )
    parser.add_argument("--plot", type=Path, help="draw the CPU of each command here (PNG)")
    parser.add_argument("--report", type=Path, metavar="JSON", help="print a --json run again")
    options = parser.parse_args()
    if options.report:
        figures = json.loads(options.report.read_text())
        print("\n".join([*report(figures), *targets(figures)]))
        if options.plot and not plot(figures, options.plot):
            print("reader_whole_process: no plot (pip install -e '.[bench]')", file=sys.stderr)
        return 0
    directory = capture(options.spans, options.cache)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"host load before: {load}", file=sys.stderr)
    figures = measure(
        directory,
        options.runs,
        options.cache / "out.jsonl",
        options.compiled_tree,
        options.baseline_tree,
    )
    figures["baseline"] = str(options.baseline_tree)
    lines = [*report(figures), *targets(figures)]
    if options.live:
        live = in_guest("live", [str(options.live_spans), str(options.live)], [],
                        options.cache / "live")  # fmt: skip
        figures["live"] = live
        lines += live_report(live)
    if options.json:
        options.json.write_text(json.dumps(figures, indent=2))
    if options.plot and not plot(figures, options.plot):
        print("reader_whole_process: no plot (pip install -e '.[bench]')", file=sys.stderr)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
