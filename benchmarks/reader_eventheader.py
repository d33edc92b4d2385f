# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Reader speed on EventHeader records beside our own format's, from the same spans.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_eventheader.py

It boots the test bed, where our span exporter writes the same spans (4 attributes, 1
event: ``reader_capture.benchmark_span``) twice, each time into a fresh reader's instance:
in our format (single-format, as ``reader_decode.py`` captures) and with
``format="eventheader"`` (Common Schema events on ``bench_eh_L4K1``); the raw
``trace_pipe_raw`` pages are saved. Then, on the host, it replays each format's pages as
``record`` reads them, read after read on one core, both formats in every round (best of
``--repeat``): decoding pages into records (``RecordDecoder``), checking them
(``JoinStage``: our records' validation and resource join; EventHeader's validation
boundary and Common Schema mapping), and writing OTLP/JSON lines to a file on disk. It
prints each format's rate at each of the three points, and EventHeader's as a ratio of
ours. An EventHeader record is split from its page as ours are, but its fields are parsed
at the check (the validation boundary), so only the last two points compare like with
like. ``--pages FILE`` measures a capture again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

from benchmarks.reader_capture import benchmark_span, run_capture  # noqa: E402
from benchmarks.reader_decode import replay  # noqa: E402
from opentelemetry_exporter_userevents import (  # noqa: E402
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.abi import parse_format  # noqa: E402
from opentelemetry_exporter_userevents.reader import TraceReader  # noqa: E402
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder  # noqa: E402
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.output import OtlpJsonOutput  # noqa: E402

PREFIX = "bench"
PROVIDER = "bench_eh"
"""The EventHeader exporter's prefix, its provider: ``bench_eh_L4K1``."""
FORMATS = {"ours": None, "eventheader": "eventheader"}
"""Each format's name here -> the exporter's ``format`` (None: the default)."""
STAGES = {
    "decoded": "pages to decoded records (EventHeader's: its event's bytes, parsed at the check)",
    "checked": "to checked records (EventHeader's: parsed, checked, mapped from Common Schema)",
    "otlp_json": "to OTLP/JSON lines on disk",
}
"""The three points timed, cumulative: each includes the ones before."""


def writer(fmt: str | None, **settings: Any) -> tuple[UserEventsSpanExporter, TracerProvider]:
    """Our span exporter in format ``fmt`` (``bench_span`` or ``bench_eh_L4K1``) under an
    SDK provider: what writes each phase's spans."""
    prefix = PROVIDER if fmt else PREFIX
    exporter = UserEventsSpanExporter(prefix=prefix, multi_format=False, format=fmt, **settings)
    provider = TracerProvider(resource=Resource({"service.name": "bench"}))
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    return exporter, provider


def capture(share: Path, count: int) -> None:
    """In the guest: ``count`` spans in each format, each format read by a fresh reader;
    ``share/pages.json``. Each phase keeps its own ``format`` files: the tracepoints deleted
    at a phase's end (the reader's held ones, the writer's) leave their event ids to the
    next phase's."""
    result: dict[str, Any] = {"spans": count, "phases": {}, "lost": 0}
    for name, fmt in FORMATS.items():
        exporter, provider = writer(fmt)
        tracer = provider.get_tracer("bench", "1.0")
        formats: dict[str, str] = {}
        kept: list[bytes] = []
        with TraceReader(prefix=PREFIX, providers=[PROVIDER], buffer_size_kb=65536) as reader:
            for number in range(count):
                benchmark_span(tracer, number)
                if number % 1000 == 999:
                    kept += [page for _, page in reader.read_cpu_pages()]
            kept += [page for _, page in reader.read_cpu_pages()]
            formats.update((text, system) for system, text in reader.formats())
            result["lost"] += reader.lost
        provider.shutdown()
        result["phases"][name] = {
            "pages": [page.hex() for page in kept],
            "formats": [(system, text) for text, system in formats.items()],
            "written": exporter.stats.written,
        }
    (share / "pages.json").write_text(json.dumps(result))


def decoder_for(phase: dict[str, Any]) -> RecordDecoder:
    """A decoder of a phase's tracepoints, as ``record --prefix bench --provider bench_eh``
    makes one."""
    decoder = RecordDecoder(PREFIX, providers=[PROVIDER])
    seen: dict[int, str] = {}
    for _system, text in phase["formats"]:
        fmt = parse_format(text)
        if seen.setdefault(fmt.id, fmt.name) != fmt.name:
            raise ValueError(f"event id {fmt.id} is both {seen[fmt.id]} and {fmt.name}")
        decoder.add(fmt)
    return decoder


def measure(captured: dict[str, Any], repeat: int) -> dict[str, Any]:
    """On the host: each format's pages through the reader's stages, the formats one after
    the other in each of ``repeat`` rounds; the best of each point's cumulative time."""
    decoders = {name: decoder_for(phase) for name, phase in captured["phases"].items()}
    phases = {name: [bytes.fromhex(p) for p in phase["pages"]]
              for name, phase in captured["phases"].items()}  # fmt: skip
    best: dict[str, dict[str, float]] = {name: {} for name in phases}
    counts: dict[str, dict[str, int]] = {}
    clock = time.perf_counter
    with tempfile.TemporaryDirectory() as directory:
        for _ in range(repeat):
            for name, pages in phases.items():
                with open(Path(directory) / name, "w", encoding="utf-8") as out:
                    started = clock()
                    join_stage = JoinStage(resource_wait=float("inf"))
                    output = OtlpJsonOutput(out)
                    spent = replay(decoders[name], pages, join_stage, output)
                    output.close()
                    out.flush()
                    os.fsync(out.fileno())
                    elapsed = clock() - started
                checked = spent["decode"] + spent["rebuild"]
                times = {"decoded": spent["decode"], "checked": checked, "otlp_json": elapsed}
                for point, seconds in times.items():
                    best[name][point] = min(seconds, best[name].get(point, float("inf")))
                stats = join_stage.stats
                if stats.invalid or stats.without_resource or output.failed:
                    raise AssertionError(f"{name}: {stats}, {output.failed} failed to write")
                counts[name] = {"spans": stats.spans, "pages": len(pages)}
    records = {name: len(decoders[name].decode_pages(pages))
               for name, pages in phases.items()}  # fmt: skip
    return rates(best, counts, records)


def rates(
    best: dict[str, dict[str, float]],
    counts: dict[str, dict[str, int]],
    records: dict[str, int],
) -> dict[str, Any]:
    """Spans per second at each point of each format, records decoded per second, and
    EventHeader's rates as multiples of ours."""
    figures: dict[str, Any] = {}
    for name, seconds in best.items():
        spans = counts[name]["spans"]
        figures[name] = {**counts[name], "records": records[name],
                         "records_decoded_per_s": records[name] / seconds["decoded"]}  # fmt: skip
        for point, spent in seconds.items():
            figures[name][f"{point}_per_s"] = spans / spent
    ours, theirs = figures["ours"], figures["eventheader"]
    figures["ratio"] = {
        point: theirs[f"{point}_per_s"] / ours[f"{point}_per_s"]
        for point in (*STAGES, "records_decoded")
    }
    return figures


def report(figures: dict[str, Any]) -> list[str]:
    """The lines ``main`` prints: both formats' rates at each point, and their ratio."""
    ours, theirs, ratio = figures["ours"], figures["eventheader"], figures["ratio"]
    lines = [
        f"{ours['spans']:,} spans in each format; our format {ours['records']:,} records in "
        f"{ours['pages']:,} pages, EventHeader {theirs['records']:,} records in "
        f"{theirs['pages']:,} pages",
        f"records decoded: ours {ours['records_decoded_per_s']:,.0f}/s, EventHeader "
        f"{theirs['records_decoded_per_s']:,.0f}/s: {ratio['records_decoded']:.2f}x ours",
    ]
    for point, label in STAGES.items():
        lines.append(
            f"spans, {label}: ours {ours[f'{point}_per_s']:,.0f}/s, EventHeader "
            f"{theirs[f'{point}_per_s']:,.0f}/s on one core: {ratio[point]:.2f}x ours"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20000, help="spans in each format")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--capture", metavar="DIR", help=argparse.SUPPRESS)  # in the guest
    parser.add_argument("--pages", metavar="FILE", help="measure pages captured earlier")
    options = parser.parse_args()
    if options.capture:
        capture(Path(options.capture), options.spans)
        return 0
    path = Path(options.pages) if options.pages else run_capture(options.spans, Path(__file__))
    if path is None:
        return 1
    print(f"reader_eventheader: pages in {path} (again: --pages {path})", file=sys.stderr)
    captured = json.loads(path.read_text())
    print(f"written in the guest: {captured['phases']['ours']['written']:,} ours, "
          f"{captured['phases']['eventheader']['written']:,} EventHeader, "
          f"{captured['lost']} lost")  # fmt: skip
    figures = measure(captured, options.repeat)
    print(json.dumps(figures, indent=2))
    print("\n".join(report(figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
