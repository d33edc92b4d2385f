# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""How long ``otel-userevents record`` takes from exec to listening, against an earlier
commit (no release exists yet), in turn in one run, on the host and in the test bed.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_start.py

The earlier commit (``--baseline``, default the last before the start was cut) is checked out in a
git worktree beside the checkout and imported first (``PYTHONPATH``) by the same Python.

- Host (no user_events): exec to exit of ``record`` pointed at an empty directory as its
  tracefs, so it stops where it would create its instance: everything before listening
  but the kernel's part. And ``--help``.
- Test bed (emulated, so only the ratio carries over): exec to the ``--ready-file`` of a
  real ``record --prefix '*' -o FILE``, the moment it listens.

Rounds alternate (current, baseline, current, ...) so that a drift of the machine's speed
weighs on both alike; medians are printed, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.guest_run import run_in_guest, save_result  # noqa: E402

BASELINE = "f8f08bd"
"""The last commit before the start was cut (no release exists yet to compare with)."""
MODULE = "opentelemetry_exporter_userevents.reader.cli"


def _tree(ref: str) -> Path:
    """A worktree of ``ref`` beside the checkout (made once, kept for later runs)."""
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", ref],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    tree = ROOT.parent / f".reader-start-{sha}"
    if not (tree / "opentelemetry_exporter_userevents").exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), sha],
            capture_output=True, check=True,
        )  # fmt: skip
    return tree


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _timed(argv: list[str], tree: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", MODULE, *argv], env=_env(tree), cwd=tree,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600,
    )  # fmt: skip
    return time.perf_counter() - started


def _until_ready(tree: Path, scratch: Path) -> float:
    ready = scratch / "ready"
    ready.unlink(missing_ok=True)
    started = time.perf_counter()
    reader = subprocess.Popen(
        [sys.executable, "-m", MODULE, "record", "--prefix", "*", "--ready-file", str(ready),
         "-o", str(scratch / "out.jsonl")],
        env=_env(tree), cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while not (ready.exists() and ready.read_text()):
            if reader.poll() is not None:
                raise RuntimeError(f"the reader of {tree} exited ({reader.returncode})")
            time.sleep(0.01)
        return time.perf_counter() - started
    finally:
        reader.terminate()
        reader.wait(120)


def measure(
    cases: dict[str, list[str] | None], trees: dict[str, Path], rounds: int
) -> dict[str, dict[str, float]]:
    """Median seconds per case and tree (None: until ready, in the test bed)."""
    seconds: dict[str, dict[str, list[float]]] = {c: {t: [] for t in trees} for c in cases}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(rounds):
            for case, argv in cases.items():
                for name, tree in trees.items():
                    taken = (
                        _until_ready(tree, Path(scratch)) if argv is None else _timed(argv, tree)
                    )
                    seconds[case][name].append(taken)
    return {
        case: {name: statistics.median(values) for name, values in by_tree.items()}
        for case, by_tree in seconds.items()
    }


def report(results: dict[str, dict[str, float]], where: str, baseline: str) -> str:
    lines = [f"otel-userevents start ({where}), median seconds", ""]
    lines.append(f"{'':44} {'this tree':>10} {baseline:>10} {'ratio':>7}")
    for case, by_tree in results.items():
        now, then = by_tree["this tree"], by_tree[baseline]
        lines.append(f"{case:44} {now:9.3f}s {then:9.3f}s {now / then:6.2f}x")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="a commit (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--guest-rounds", type=int, default=3)
    parser.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--trees", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_guest:
        trees = {"this tree": Path(args.trees[0]), args.baseline: Path(args.trees[1])}
        cases: dict[str, list[str] | None] = {"record --prefix '*', exec to ready": None}
        save_result("reader_start", measure(cases, trees, args.guest_rounds))
        return 0
    baseline = _tree(args.baseline)
    trees = {"this tree": ROOT, args.baseline: baseline}
    with tempfile.TemporaryDirectory() as empty:
        host_cases: dict[str, list[str] | None] = {
            "record, exec to where it creates its instance": [
                "--tracefs", empty, "record", "-o", os.devnull,
            ],
            "--help": ["--help"],
        }  # fmt: skip
        print(report(measure(host_cases, trees, args.rounds), "host", args.baseline))
    code, result, machine = run_in_guest(
        "reader_start",
        ["--baseline", args.baseline, "--guest-rounds", str(args.guest_rounds),
         "--trees", str(ROOT), str(baseline)],
    )  # fmt: skip
    if code:
        return code
    print()
    print(report(result, f"test bed: {machine}", args.baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
