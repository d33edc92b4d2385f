# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The whole-process benchmark's host part: commands timed in turn give the medians of
the pairs' ratios, and each issue-34 target is said met or missed by how much."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import reader_whole_process as bench


def test_ratios_are_the_median_of_the_pairs_not_of_the_medians(monkeypatch) -> None:
    # A's times drift with the machine; B's drift the same way: pair by pair, A is 2x B.
    times = iter([1.0, 1.0] + [t for s in (1, 5, 9) for t in (2.0 * s, 1.0 * s)])

    def run(argv: list[str], cwd: object = None) -> dict[str, float]:
        wall = next(times)
        return {"wall": wall, "cpu": wall, "rss": 10.0}

    monkeypatch.setattr(bench, "run", run)
    figures = bench.in_turn(["a"], ["b"], 3)
    assert figures["wall_ratio"] == pytest.approx(2.0)
    assert figures["cpu_ratio"] == pytest.approx(2.0)
    assert figures["a_wall"] == pytest.approx(10.0) and figures["b_wall"] == pytest.approx(5.0)


def _figures(cpu_ratio: float, spans_per_cpu_s: float, two_speedup: float) -> dict[str, Any]:
    one = {"a_wall": 2.0, "b_wall": 1.0, "a_cpu": 100_000 / spans_per_cpu_s,
           "cpu_ratio": cpu_ratio}  # fmt: skip
    two = {"a_wall": 2.0 / two_speedup, "b_wall": 1.0}
    return {"trace-cmd report": {"spans": 100_000, "workers_1": one, "workers_2": two}}


def test_each_target_is_met_or_missed_by_a_ratio() -> None:
    met = bench.targets(_figures(1.5, 50_000, 1.8))
    assert all(line.endswith(": met") for line in met), met
    missed = bench.targets(_figures(7.5, 38_000, 1.1))
    assert "missed: 3.75x the bound" in missed[0]
    assert "missed: 0.95x the bound" in missed[1]
    assert "missed: 0.65x the bound" in missed[2]


def test_without_trace_cmd_the_targets_say_not_measured() -> None:
    assert "not measured" in bench.targets({})[0]


def test_the_plot_draws_each_tool_beside_decode_in_both_builds(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    figures = _figures(7.0, 45_000, 1.2)
    row = figures["trace-cmd report"]
    row["workers_1"].update(b_cpu=0.3, a_cpu=2.2)
    row["workers_2"]["a_cpu"] = 2.8
    row["compiled_vs_tool"] = {"a_cpu": 1.9}
    assert bench.plot(figures, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
