# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's end-to-end figures against each target of issue 24, from one run.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_targets.py \\
        --plot docs/reader.png

It boots the test bed once for a capture (``benchmarks/reader_capture.py``: spans, logs and
metric points, single-format, with a perf.data of the same records), then, on the host:
pages to OTLP/JSON lines on disk, on one core and with two workers
(``benchmarks/reader_decode.py``); ``decode`` against ``trace-cmd report`` and ``perf
script`` as whole processes over the same records (``benchmarks/reader_tools.py``); pages
to an OTLP/HTTP receiver (``benchmarks/reader_export.py``); then boots the test bed again
for ``record`` through a burst (``benchmarks/reader_memory.py``; ``--memory-spans 0``
skips it, ``--memory-json FILE`` takes that script's ``--json`` result instead). It prints
each part's lines and one ``targets`` block, writes every figure to ``--json``
(``build/bench/reader.json``; ``--report FILE`` prints and plots that again) and, with
``--plot``, the plot.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import reader_decode, reader_export, reader_memory, reader_tools  # noqa: E402
from benchmarks.reader_capture import WHAT, run_capture  # noqa: E402

CAPTURE_SCRIPT = ROOT / "benchmarks" / "reader_decode.py"
"""What runs the capture in the test bed (``--capture DIR``)."""


def run(options: argparse.Namespace) -> dict[str, Any] | None:
    path = Path(options.pages) if options.pages else run_capture(options.items, CAPTURE_SCRIPT)
    if path is None:
        return None
    print(f"reader_targets: capture in {path} (again: --pages {path})", file=sys.stderr)
    results: dict[str, Any] = {"machine": _machine(), "capture": str(path)}
    results["repeat"] = options.repeat
    results["decode"] = reader_decode.measure(path, options.repeat, (2,))
    results["tools"] = reader_tools.measure(path, options.runs)
    affinity = os.sched_getaffinity(0)
    available = sorted(affinity)
    cpus = (available[0], available[1]) if len(available) >= 2 else None
    try:
        export = reader_export.measure(path, options.repeat, cpus)
    finally:
        os.sched_setaffinity(0, affinity)  # measure pins this process to one core
    export.update(compression="none", cpus=list(cpus) if cpus else "unpinned")
    export["load_average"] = list(os.getloadavg())
    results["export"] = export
    if options.memory_json:
        results["memory"] = json.loads(Path(options.memory_json).read_text())
    elif options.memory_spans:
        argv = [sys.executable, str(ROOT / "benchmarks" / "reader_memory.py"), "--spans",
                str(options.memory_spans), "--json", str(Path(options.json).with_suffix(
                    ".memory.json"))]  # fmt: skip
        done = subprocess.run(argv, check=False)
        if done.returncode == 0:
            results["memory"] = json.loads(Path(argv[-1]).read_text())
    return results


def _machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()),
    }


def report(results: dict[str, Any]) -> str:
    machine = results["machine"]
    lines = [
        f"host: {machine['platform']}, {machine['cpus']} CPUs, Python {machine['python']}, "
        f"load average at start {machine['load_average'][0]:.2f}",
        "",
        "Pages to OTLP/JSON lines on disk:",
        *reader_decode.report(results["decode"], [2]),
        "",
        "Against the tools, whole processes, same records:",
        *reader_tools.report(results["tools"], results["decode"]),
        "",
        "Pages to an OTLP/HTTP receiver:",
        *reader_export.report(results["export"], results["repeat"]),
    ]
    memory = results.get("memory")
    if memory:
        lines += ["", reader_memory.report(memory, "qemu TCG guest")]
    lines += ["", "targets:", *(f"  {line}" for line in targets(results))]
    return "\n".join(lines)


def targets(results: dict[str, Any]) -> list[str]:
    """Each target, met or missed by how much; ratios for the kinds without one."""
    lines = [*reader_decode.targets(results["decode"]), *reader_export.targets(results["export"])]
    for kind, what in WHAT.items():
        if kind not in results["decode"]:
            continue
        json_now = results["decode"][kind]
        http_now = results["export"][kind]
        tools = results["tools"].get(kind, {})
        lines.append(
            f"{what}: OTLP/JSON {json_now['direct_per_s']:,.0f}/s "
            f"({json_now['direct_to_sdk']:.2f}x before), OTLP/HTTP "
            f"{http_now['direct_per_s']:,.0f}/s ({http_now['direct_to_sdk']:.2f}x before)"
            + "".join(f"; decode {row['ratio']:.2f}x {tool}'s time" for tool, row in tools.items())
        )
    lines += reader_tools.targets(results["tools"])
    memory = results.get("memory")
    if memory:
        lines.append(reader_memory.report(memory, "").splitlines()[-1].removeprefix("targets: "))
    else:
        lines.append("record through a burst: not run (--memory-spans 0)")
    return lines


def plot(results: dict[str, Any], path: str) -> bool:
    """Rates by kind and path, whole-process times against the tools, the burst's peak."""
    try:
        import matplotlib  # noqa: PLC0415 - optional

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    kinds = [k for k in WHAT if k in results["decode"]]
    figure, axes = plt.subplots(1, 3, figsize=(16, 5.5), constrained_layout=True)
    ax = axes[0]
    bars: list[tuple[str, Callable[[str], float], str]] = [
        ("OTLP/JSON, now", lambda k: results["decode"][k]["direct_per_s"], "#4c72b0"),
        ("OTLP/JSON, 2 workers", lambda k: results["decode"][k]["workers_2_per_s"], "#55a868"),
        ("OTLP/JSON, before", lambda k: results["decode"][k]["sdk_per_s"], "#c44e52"),
        ("OTLP/HTTP, now", lambda k: results["export"][k]["direct_per_s"], "#8172b2"),
        ("OTLP/HTTP, before", lambda k: results["export"][k]["sdk_per_s"], "#dd8452"),
    ]  # fmt: skip
    width = 0.8 / len(bars)
    for number, (label, value, color) in enumerate(bars):
        xs = [k + number * width for k in range(len(kinds))]
        values = [value(k) / 1000 for k in kinds]
        ax.bar(xs, values, width, label=label, color=color)
        for x, v in zip(xs, values, strict=True):
            ax.text(x, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    ax.axhline(40, color="#4c72b0", linestyle="--", linewidth=0.8)
    ax.axhline(20, color="#8172b2", linestyle=":", linewidth=0.8)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(kinds))], [WHAT[k] for k in kinds])
    ax.set_title("Pages to OTLP, thousands per second\n(one core unless said; goals dashed)")
    ax.legend(fontsize=8)
    ax = axes[1]
    rows = [
        (f"{WHAT[k]}: {tool}", row)
        for k in kinds
        for tool, row in results["tools"].get(k, {}).items()
    ]  # fmt: skip
    ys = range(len(rows))
    ax.barh(
        [y - 0.2 for y in ys],
        [r["a_wall_s"] for _, r in rows],
        0.4,
        label="decode",
        color="#4c72b0",
    )
    ax.barh([y + 0.2 for y in ys], [r["b_wall_s"] for _, r in rows], 0.4, label="the tool",
            color="#9a9a9a")  # fmt: skip
    for y, (_, row) in zip(ys, rows, strict=True):
        ax.text(row["a_wall_s"], y - 0.2, f" {row['ratio']:.1f}x", va="center", fontsize=8)
    ax.set_yticks(list(ys), [name for name, _ in rows])
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=8)
    ax.margins(x=0.15)
    ax.legend(fontsize=8)
    ax.set_title("Whole process over the same records, seconds\n(decode vs the tool's own reader)")
    ax = axes[2]
    memory = results.get("memory")
    if memory:
        hwm = {str(k): v / 1024 for k, v in memory["hwm_kib"].items()}
        ax.bar(["reader and workers\n(VmHWM summed)"], [sum(hwm.values())], color="#4c72b0")
        ax.axhline(reader_memory.GOAL_MIB, color="#c44e52", linestyle="--", linewidth=0.8)
        ax.set_ylim(0, reader_memory.GOAL_MIB * 1.2)
        ax.set_title(
            f"record through a {memory['spans']:,}-span burst (test bed), peak MiB\n"
            f"rebuilt {memory['rebuilt']:,}, lost {memory['lost']:,} (goal < 200 MiB)"
        )
    else:
        ax.set_axis_off()
    figure.suptitle("otel-userevents reader, end to end (issue 24 targets; host 2 vCPUs, shared)")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20000, help="of each kind, captured")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of the in-process parts")
    parser.add_argument("--runs", type=int, default=5, help="pairs of whole processes")
    parser.add_argument("--pages", metavar="FILE", help="a capture made earlier (pages.json)")
    parser.add_argument("--memory-spans", type=int, default=1_000_000)
    parser.add_argument("--memory-json", metavar="FILE", help="reader_memory.py --json's result")
    parser.add_argument("--json", default=str(ROOT / "build" / "bench" / "reader.json"))
    parser.add_argument("--report", metavar="FILE", help="print and plot a result again")
    parser.add_argument("--plot", metavar="PNG")
    options = parser.parse_args()
    if options.report:
        results = json.loads(Path(options.report).read_text())
    else:
        Path(options.json).parent.mkdir(parents=True, exist_ok=True)
        measured = run(options)
        if measured is None:
            return 1
        results = measured
        Path(options.json).write_text(json.dumps(results, indent=2))
    print(report(results))
    if options.plot and not plot(results, options.plot):
        print("reader_targets: no plot (matplotlib: pip install -e '.[bench]')", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
