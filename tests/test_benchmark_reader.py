# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader benchmarks' host parts on small inputs: a capture's pages written as a
trace.dat decode back, and the targets block says met or by how much it is missed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import capture_memory, reader_memory, reader_targets, reader_tools
from opentelemetry_exporter_userevents.reader.capture import decode_file
from tests.support.captures import HEADER_EVENT
from tests.support.pages import HEADER_PAGE, data_event, page


def test_a_captures_pages_become_a_trace_dat_the_reader_decodes(tmp_path: Path) -> None:
    _, raw = capture_memory.resource_record()
    pages = [page(1000 + n, [data_event(0, raw)]).hex() for n in range(3)]
    captured = {
        "pages": {"span": pages},
        "cpus": {"span": [0, 1, 0]},
        "formats": capture_memory.FORMATS,
        "header_page": HEADER_PAGE,
        "header_event": HEADER_EVENT,
    }
    path = tmp_path / "span.dat"
    reader_tools.trace_dat(captured, "span", path)
    decoded = decode_file(str(path), ["bench"])
    assert decoded.kind.startswith("trace.dat") and len(list(decoded.records)) == 3


def _results(one: float, two: float, http: float, tool_ratio: float, peak_kib: int) -> Any:
    kind = {"direct_per_s": one, "sdk_per_s": one / 4, "direct_to_sdk": 4.0}
    decode = {k: {**kind, "workers_2_to_one": two} for k in ("span", "log", "metric")}
    export = {k: {"direct_per_s": http, "direct_to_sdk": 2.0} for k in ("span", "log", "metric")}
    row = {"ratio": tool_ratio}
    tools = {k: {"trace-cmd report": row, "perf script": row} for k in ("span", "log", "metric")}
    memory = {
        "spans": 1_000_000, "writers": 2, "workers": 2, "buffer_size_kb": 1, "written": 10,
        "writer_seconds": 1.0, "writers_done_s": 1.0, "caught_up_s": 2.0, "rebuilt": 10,
        "lost": 0, "hwm_kib": {"1": peak_kib}, "hwm_sum_kib": peak_kib,
        "reader_hwm_kib": peak_kib, "rss_sum_peak_kib": peak_kib,
    }  # fmt: skip
    return {"decode": decode, "export": export, "tools": {"tools": {}, **tools}, "memory": memory}


def test_the_targets_block_says_met_or_by_how_much_each_is_missed() -> None:
    met = reader_targets.targets(_results(50_000, 1.9, 25_000, 0.9, 100 << 10))
    assert sum(": met" in line for line in met) == 5, met
    missed = "\n".join(reader_targets.targets(_results(30_000, 1.5, 15_000, 9.0, 300 << 10)))
    assert "missed by 10,000" in missed and "missed by 0.30x" in missed
    assert "missed by 5,000 spans/s" in missed and "8.00x over" in missed
    assert "missed by 100 MiB" in missed and ": met" not in missed
    assert "decode 9.00x perf script's time" in missed


def test_the_memory_report_names_the_peak_and_what_was_lost() -> None:
    text = reader_memory.report(_results(1, 1, 1, 1, 150 << 10)["memory"], "m")
    assert "rebuilt 10, lost 0" in text and text.endswith("under 200 MiB: met")
