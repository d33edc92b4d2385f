# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader against ``trace-cmd report`` and ``perf script`` over the same records, as
whole processes, side by side.

    .venv/bin/python benchmarks/reader_tools.py --pages DIR/pages.json

From a capture of ``benchmarks/reader_capture.py`` (single-format, which both tools can
parse): for each kind (spans, logs, metric points), the reader's pages are written as a
trace.dat v6 (``TraceDatWriter``, as ``record --capture`` writes them), and the phase's
perf.data, recorded by ``perf record -a`` over the same records, is used as it is. Then,
for each file, ``otel-userevents decode FILE -o OUT`` and the tool's own reader
(``trace-cmd report FILE``, ``perf script -i FILE``, their text to /dev/null) are started
in turn, A B A B ..., ``--runs`` times each after a warm-up pair; each run is the whole
process, its start included, timed from outside (wall clock from start to reaped; CPU and
from ``wait4``). Medians, and the median of the pairs' ratios. Each command's
output is checked once beforehand: every record read (the tools' lines naming our
tracepoints; the reader's rebuilt count).
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
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.reader_capture import WHAT  # noqa: E402
from opentelemetry_exporter_userevents.reader.capture import TraceDatWriter  # noqa: E402

PAGE_SIZE = 4096


def trace_dat(captured: dict[str, Any], kind: str, path: Path) -> None:
    """The phase's pages as a trace.dat v6, as ``record --capture`` writes them."""
    writer = TraceDatWriter(str(path), PAGE_SIZE, captured["header_page"], captured["header_event"])
    for cpu, page in zip(captured["cpus"][kind], captured["pages"][kind], strict=True):
        writer.add_page(cpu, bytes.fromhex(page))
    for system, text in captured["formats"]:
        writer.add_format(system, text)
    writer.close("")


def _reader_cli() -> list[str]:
    """``otel-userevents`` of this tree (``-m`` from its root: the console script of an
    editable install may be another checkout's)."""
    return [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli"]


def _run(argv: list[str]) -> tuple[float, float]:
    """One whole process, its output to /dev/null: (wall s, CPU s)."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{argv} exited {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def side_by_side(a: list[str], b: list[str], runs: int) -> dict[str, float]:
    """A and B in turn (a warm-up pair first, not counted): medians, and the median of the
    pairs' A/B wall-time ratios."""
    _run(a), _run(b)
    pairs = [(_run(a), _run(b)) for _ in range(runs)]
    figures: dict[str, float] = {"runs": runs}
    for side, index in (("a", 0), ("b", 1)):
        for name, field in (("wall_s", 0), ("cpu_s", 1)):
            figures[f"{side}_{name}"] = statistics.median(p[index][field] for p in pairs)
        figures[f"{side}_wall_min_s"] = min(p[index][0] for p in pairs)
        figures[f"{side}_wall_max_s"] = max(p[index][0] for p in pairs)
    figures["ratio"] = statistics.median(p[0][0] / p[1][0] for p in pairs)
    return figures


def _lines_naming(argv: list[str], prefix: str) -> int:
    done = subprocess.run(argv, capture_output=True, text=True, errors="replace", check=True)
    return sum(f"{prefix}_" in line for line in done.stdout.splitlines())


def _rebuilt(argv: list[str], kind: str) -> int:
    done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
    pattern = {
        "span": r"(\d+) spans and \d+ logs rebuilt",
        "log": r"\d+ spans and (\d+) logs rebuilt",
        "metric": r"(\d+) metric points rebuilt",
    }[kind]
    found = re.search(pattern, done.stderr)
    return int(found[1]) if found else 0


def measure(path: Path, runs: int, prefix: str = "bench") -> dict[str, Any]:
    captured = json.loads(path.read_text())
    tools = {name: shutil.which(name) for name in ("trace-cmd", "perf")}
    figures: dict[str, Any] = {"tools": {}}
    for name, tool in tools.items():
        if tool is not None:
            version = subprocess.run([tool, "--version"], capture_output=True, text=True)
            figures["tools"][name] = (version.stdout or version.stderr).strip().splitlines()[0]
    with tempfile.TemporaryDirectory(prefix="reader-tools-") as directory:
        out = str(Path(directory) / "out.jsonl")
        for kind in WHAT:
            if kind not in captured["pages"]:
                continue
            kind_figures: dict[str, Any] = {}
            dat = Path(directory) / f"{kind}.dat"
            trace_dat(captured, kind, dat)
            files: dict[str, tuple[Path, list[str] | None]] = {
                "trace-cmd report": (
                    dat, [tools["trace-cmd"], "report", str(dat)] if tools["trace-cmd"] else None
                ),
            }  # fmt: skip
            perf_name = captured.get("perf", {}).get(kind)
            if perf_name and tools["perf"]:
                data = path.parent / perf_name
                files["perf script"] = (data, [tools["perf"], "script", "-f", "-i", str(data)])
            for tool_name, (file, tool_argv) in files.items():
                if tool_argv is None:
                    continue
                decode = [*_reader_cli(), "decode", str(file), "-o", out]
                row = side_by_side(decode, tool_argv, runs)
                row["file_bytes"] = file.stat().st_size
                row["tool_lines"] = _lines_naming(tool_argv, prefix)
                row["reader_items"] = _rebuilt(decode, kind)
                kind_figures[tool_name] = row
            figures[kind] = kind_figures
    return figures


def report(figures: dict[str, Any], decode: dict[str, Any] | None = None) -> list[str]:
    """One line per kind and tool; with ``decode`` (``reader_decode.measure``'s figures),
    also the reader's one-core rate from pages as a ratio to the tool's rate."""
    lines = [f"tools: {', '.join(figures['tools'].values())}"]
    for kind, what in WHAT.items():
        for tool, row in figures.get(kind, {}).items():
            items = row["reader_items"]
            line = (
                f"{what}, decode as a whole process vs {tool}, same file "
                f"({row['file_bytes'] / 1048576:.1f} MiB, {row['tool_lines']:,} records it "
                f"printed, {items:,} {what} rebuilt): {row['a_wall_s']:.3f} s vs "
                f"{row['b_wall_s']:.3f} s (median of {row['runs']:.0f}), {row['ratio']:.2f}x "
                f"its time"
            )
            if decode is not None and kind in decode:
                tool_rate = row["tool_lines"] / row["b_wall_s"]
                one = decode[kind]["direct_per_s"]
                line += (
                    f"; pages to OTLP/JSON on one core {one:,.0f}/s = {one / tool_rate:.2f}x "
                    f"{tool}'s {tool_rate:,.0f} records/s"
                )
            lines.append(line)
    return lines


def targets(figures: dict[str, Any]) -> list[str]:
    """``decode`` of a capture, whole process, no slower than ``trace-cmd report``."""
    row = figures.get("span", {}).get("trace-cmd report")
    if row is None:
        return ["decode vs trace-cmd report: not measured (trace-cmd not installed)"]
    ratio = row["ratio"]
    verdict = "met" if ratio <= 1 else f"missed: {ratio:.2f}x its time ({ratio - 1:.2f}x over)"
    return [f"decode of a capture vs trace-cmd report, whole processes, <= 1x: {verdict}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", metavar="FILE", required=True, help="a capture's pages.json")
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    figures = measure(Path(options.pages), options.runs)
    print(json.dumps(figures, indent=2))
    print("\n".join([*report(figures), *targets(figures)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
