# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""benchmarks/kernel_view_cost.py's host parts: its figures from rounds of known numbers,
and its count of a reader output's spans by kernel view and shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks import kernel_view_cost as bench


def _round(mode: str, app_us: float, cpu_s: float, events: int) -> dict[str, Any]:
    shapes = bench.SHAPES
    return {
        "mode": mode, "us_per_span": {s: [app_us, app_us * 3] for s in shapes},
        "reader_cpu_s": dict.fromkeys(shapes, cpu_s), "spans": dict.fromkeys(shapes, 1000),
        "missing": 0, "not_listened": 0, "pread_us": 3.0 if mode == "off" else 5.0,
        "kernel_events": events, "kernel_events_lost": 0, "spans_rebuilt": 2000,
        "views": {"whole": 2000} if mode == "on" else {"-": 2000}, "clock": "clock",
        "held": {s: [10, 50, 1] for s in shapes}, "top_syscalls": {"5 preads": {"pread64": 5}},
    }  # fmt: skip


def test_figures_and_ratios_from_known_rounds() -> None:
    result = {"rounds": [_round("off", 100, 0.5, 0), _round("on", 150, 1.0, 14000)],
              "blocks": 2, "block": 500, "clocksource": ["tsc (0.001 µs)"] * 2}  # fmt: skip
    figures = bench.figures(result)
    assert figures["off"]["plain"]["app_us"] == 200  # median of 100 and 300
    assert figures["on"]["plain"]["app_us"] == 300
    assert figures["off"]["plain"]["reader_cpu_us"] == 500  # 0.5 s over 1000 spans
    assert figures["on"]["all"]["kernel_events_per_span"] == 7
    text = bench.report(result, "test")
    assert "plain: the app +100.0 µs per span (×1.50); the reader +500.0 µs CPU" in text
    assert "+2.00 µs per syscall traced" in text
    assert "problems: none" in text
    assert "of the baseline's added cost" not in text  # no baseline's readers in this run


def test_the_added_cost_against_the_baseline_in_the_same_run() -> None:
    result = {"rounds": [_round("off", 100, 0.5, 0), _round("on", 150, 1.0, 14000),
                         _round("base", 150, 1.5, 14000)],
              "blocks": 2, "block": 500, "clocksource": ["tsc (0.001 µs)"] * 2}  # fmt: skip
    text = bench.report(result, "test")
    assert "plain: --kernel adds 500.0 µs of the reader's CPU per span (1000.0 µs at" in text
    assert "×0.50 of the baseline's added cost" in text


def test_the_output_is_counted_by_view_and_shape(tmp_path: Path) -> None:
    def span(top: list[str]) -> dict[str, Any]:
        ints = {"linux.syscall.count": len(top), "linux.sched.switches.voluntary": 1,
                "linux.sched.switches.involuntary": 0}  # fmt: skip
        attributes = [{"key": k, "value": {"intValue": str(v)}} for k, v in ints.items()]
        attributes.append({"key": "linux.kernel.view", "value": {"stringValue": "whole"}})
        names = [{"stringValue": n} for n in top]
        counts = [{"intValue": "1"} for _ in top]
        attributes.append({"key": "linux.syscall.top.name",
                           "value": {"arrayValue": {"values": names}}})  # fmt: skip
        attributes.append({"key": "linux.syscall.top.count",
                           "value": {"arrayValue": {"values": counts}}})  # fmt: skip
        return {"attributes": attributes}

    request = {"resourceSpans": [{"scopeSpans": [{"spans": [span([]), span(["pread64"])]}]}]}
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps(request) + "\n" + json.dumps(request)[:10])  # a partial line
    output = bench._Output(path)
    assert output.count() == 2 and output.views == {"whole": 2}
    assert output.held == {"plain": [1, 0, 1], "5 preads": [1, 1, 1]}
    assert output.top["5 preads"] == {"pread64": 1}
