# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader benchmarks' host parts on small inputs: a capture's pages written as a
trace.dat decode back, the targets block says met or by how much it is missed, and
EventHeader's and our format's pages of the same spans both go through every stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import (
    capture_memory,
    reader_eventheader,
    reader_memory,
    reader_targets,
    reader_tools,
)
from benchmarks.reader_capture import benchmark_span
from opentelemetry_exporter_userevents.reader.capture import decode_file
from opentelemetry_exporter_userevents.record.tracepoints import parse_tracepoint
from tests.support.captures import HEADER_EVENT, format_text
from tests.support.eventheader_captures import eventheader_format
from tests.support.fake_kernel import FakeKernel
from tests.support.pages import HEADER_PAGE, data_event, page, record


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


def _captured(fake: FakeKernel, count: int) -> dict[str, Any]:
    """A capture as ``reader_eventheader.capture`` saves one, from what both formats' writers
    wrote to the stand-in for user_events_data: each format's records in pages, each
    tracepoint's ``format`` file."""
    phases: dict[str, Any] = {}
    for name, fmt in reader_eventheader.FORMATS.items():
        exporter, provider = reader_eventheader.writer(fmt, tracefs=fake.tracefs)
        tracer = provider.get_tracer("bench", "1.0")
        for number in range(count):
            benchmark_span(tracer, number)
        provider.shutdown()
        phases[name] = {"written": exporter.stats.written, "formats": []}
    fake.settle()
    phase_of = {}  # the announcements' tracepoint is not the reader's: left out
    for index, command in enumerate(fake.commands):
        name = command.split(" ", 1)[0]
        ours = parse_tracepoint(name)
        if name.startswith(reader_eventheader.PROVIDER):
            phase_of[index] = "eventheader"
            text = eventheader_format(name, 100 + index)
        elif ours is not None:
            phase_of[index] = "ours"
            text = format_text(ours.schema, name, 100 + index)
        else:
            continue
        phases[phase_of[index]]["formats"].append(("user_events", text))
    events: dict[str, list[bytes]] = {name: [] for name in phases}
    for message in fake.messages:
        index = int.from_bytes(message[:4], "little")
        if index in phase_of:
            events[phase_of[index]].append(data_event(10, record(100 + index, message[4:])))
    for name, phase in phases.items():
        phase["pages"] = [p.hex() for p in _pages(events[name])]
    return {"spans": count, "phases": phases, "lost": 0}


def _pages(events: list[bytes]) -> list[bytes]:
    pages, body, used = [], [], 16
    for event in events:
        if used + len(event) > 4096:
            pages.append(page(1000 + len(pages), body))
            body, used = [], 16
        body.append(event)
        used += len(event)
    return [*pages, page(1000 + len(pages), body)]


def test_eventheader_and_our_format_decode_side_by_side_from_the_same_spans(
    monkeypatch: Any, tmp_path: Path
) -> None:
    captured = _captured(FakeKernel(monkeypatch, tmp_path), 40)

    figures = reader_eventheader.measure(captured, repeat=2)
    lines = reader_eventheader.report(figures)

    assert [figures[n]["spans"] for n in ("ours", "eventheader")] == [40, 40]
    assert figures["ours"]["records"] == 41 and figures["eventheader"]["records"] == 40
    assert figures["eventheader"]["pages"] > 1, "records of several pages"
    assert all(figures[n][f"{p}_per_s"] > 0 for n in ("ours", "eventheader")
               for p in reader_eventheader.STAGES)  # fmt: skip
    ratio = figures["ratio"]["otlp_json"]
    assert ratio == figures["eventheader"]["otlp_json_per_s"] / figures["ours"]["otlp_json_per_s"]
    assert f"{ratio:.2f}x ours" in lines[-1] and "to OTLP/JSON lines on disk" in lines[-1]
    assert "40 spans in each format; our format 41 records" in lines[0]


def test_the_rates_are_spans_over_the_best_time_and_eventheaders_over_ours() -> None:
    best = {"ours": {"decoded": 1.0, "checked": 2.0, "otlp_json": 4.0},
            "eventheader": {"decoded": 2.0, "checked": 5.0, "otlp_json": 8.0}}  # fmt: skip
    counts = {n: {"spans": 100, "pages": 3} for n in best}

    figures = reader_eventheader.rates(best, counts, {"ours": 101, "eventheader": 100})

    assert figures["ours"]["checked_per_s"] == 50 and figures["eventheader"]["checked_per_s"] == 20
    assert figures["ratio"] == {"decoded": 0.5, "checked": 0.4, "otlp_json": 0.5,
                                "records_decoded": 50 / 101}  # fmt: skip
    assert "EventHeader 50/s: 0.50x ours" in reader_eventheader.report(figures)[1]


def test_a_phase_whose_formats_share_an_event_id_is_refused() -> None:
    # The kernel gives a deleted tracepoint's id to the next one registered: formats of
    # different phases mixed would decode one format's records with another's layout.
    phase = {"formats": [("user_events", eventheader_format("bench_eh_L4K1", 100)),
                         ("user_events", eventheader_format("bench_eh_L5K1", 100))]}  # fmt: skip
    with pytest.raises(ValueError, match="event id 100 is both bench_eh_L4K1 and bench_eh_L5K1"):
        reader_eventheader.decoder_for(phase)
