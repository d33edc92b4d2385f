# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Where a whole ``decode`` process's time goes that an in-process figure leaves out.

    .venv/bin/python benchmarks/reader_gap.py FILE [--runs 5]

For a capture (``benchmarks/reader_whole_process.py`` keeps one), each as CPU seconds
(user + system), the median of ``--runs``: the interpreter alone (``python -c pass``); the
interpreter and the reader's imports (``decode --help``); ``decode FILE --workers 1`` as a
whole process, to a file and to /dev/null; then, in one process, the same command's
function called ``--runs`` times on the file (the first call cold, the rest warm; the
in-process benchmarks take the best of warm rounds); and two workers' start (their
processes up and answering). Bytecode is cached, as in an install.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry_exporter_userevents.reader import cli  # noqa: E402
from opentelemetry_exporter_userevents.reader.pipeline.worker_pool import WorkerPool  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
READER = [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli"]


def process_cpu(argv: list[str]) -> float:
    """CPU seconds of one whole process (``wait4``), its output to /dev/null."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               cwd=ROOT, env=ENV)  # fmt: skip
    _, _, usage = os.wait4(process.pid, 0)
    return usage.ru_utime + usage.ru_stime


def in_process(file: str, out: str, runs: int) -> list[float]:
    """CPU seconds of each call of the ``decode`` command's function in this process."""
    times = []
    for _ in range(runs):
        started = time.process_time()
        args = cli.parser().parse_args(["decode", file, "--workers", "1", "-o", out])
        cli._run(args)  # noqa: SLF001 - the command without the process around it
        times.append(time.process_time() - started)
    return times


def worker_start(runs: int) -> float:
    """Wall seconds for two workers to start and answer (median)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        with WorkerPool(2, ["bench"], None) as pool:  # type: ignore[arg-type]
            pool.result(pool.submit([], []))
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    runs, file = options.runs, options.file
    with tempfile.TemporaryDirectory() as directory:
        out = str(Path(directory) / "out.jsonl")
        decode = [*READER, "decode", file, "--workers", "1"]
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "decode --help (start-up, imports)": [*READER, "decode", "--help"],
            "decode --workers 1 -o FILE": [*decode, "-o", out],
            "decode --workers 1 -o /dev/null": [*decode, "-o", os.devnull],
        }
        process_cpu(commands["decode --workers 1 -o FILE"])  # bytecode cached
        figures = {name: [] for name in commands}  # type: dict[str, list[float]]
        for _ in range(runs):  # in turn: drift touches each alike
            for name, argv in commands.items():
                figures[name].append(process_cpu(argv))
        sys.stderr = io.StringIO()  # the command's summary lines
        calls = in_process(file, out, runs)
        sys.stderr = sys.__stderr__
    for name, times in figures.items():
        print(f"{name:<36} {statistics.median(times):7.3f} CPU-s (whole process)")
    print(f"{'decode in-process, first call':<36} {calls[0]:7.3f} CPU-s")
    print(f"{'decode in-process, warm (best)':<36} {min(calls[1:] or calls):7.3f} CPU-s")
    print(f"{'two workers started and answering':<36} {worker_start(runs):7.3f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
