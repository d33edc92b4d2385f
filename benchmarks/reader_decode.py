# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Reader speed, end to end, from ring-buffer pages captured on a real kernel.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_decode.py

It boots the test bed, where spans (4 attributes, 1 event), then logs (4 attributes), then
metric points (a counter, a histogram and a gauge with 4 attributes, through the metric
exporter) go into a reader's instance, single-format, and the raw ``trace_pipe_raw`` pages
are saved (``benchmarks/reader_capture.py``, which also keeps a perf.data of the same
records); then, on the host, it times each stage of the reader on one core, for each kind:
decoding those pages into records (``RecordDecoder``: the target is 100,000
records/s), rebuilding them (``JoinStage``), and writing OTLP/JSON lines to a file on disk
(the goal, end to end: 40,000 spans/s), both ways side by side in one run: checked records
written straight (``otlp_json_direct``, what the reader does) and through SDK objects, the
OTLP encoder and ``MessageToDict`` (what it did before; metric points still go this way
in both); and the tree view. It prints the
rates, their ratio and each stage's share; then the reader's path with workers (``--workers 2``
by default, more with ``--workers 2 4``), in the same rounds, its file checked equal to
the one-core file, and a ``targets`` line. ``--pages FILE`` measures a capture again.
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

from benchmarks.reader_capture import (  # noqa: E402
    STAT,
    WHAT,
    capture,
    of_kind,
    run_capture,
)
from opentelemetry_exporter_userevents.abi import parse_format  # noqa: E402
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder  # noqa: E402
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_objects import sdk_objects  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.output import (  # noqa: E402
    OtlpJsonOutput,
    Output,
    TreeOutput,
)
from opentelemetry_exporter_userevents.reader.pipeline.worker_pool import WorkerPool  # noqa: E402

PATHS = {
    "direct": "OTLP/JSON lines on disk, written straight from checked records (the reader now)",
    "sdk": "OTLP/JSON lines on disk, through SDK objects, the OTLP encoder and MessageToDict "
    "(the reader before)",
    "tree": "the tree view on disk (SDK objects)",
}
PAGES_PER_READ = 100
"""About 1,000 spans: what one read of the capture took."""


def _with_workers(
    pool: WorkerPool, pages: list[bytes], formats: list[str], out: Any
) -> tuple[JoinStage, OtlpJsonOutput]:
    """Pages to OTLP/JSON lines as ``record --workers N`` does: each read's pages split
    into a chunk per worker, one read in flight while the main process rebuilds and
    writes the read before (records in page order, as the one-core path here)."""
    join_stage = JoinStage(resource_wait=float("inf"))
    output = OtlpJsonOutput(out)
    size = -(-PAGES_PER_READ // pool.count)
    in_flight: list[int] = []

    def deliver() -> None:
        records: list[Any] = []
        for ticket in in_flight:
            records += pool.result(ticket)
        output.write(join_stage.add(records))

    for first in range(0, len(pages), PAGES_PER_READ):
        read = pages[first : first + PAGES_PER_READ]
        tickets = [pool.submit(read[n : n + size], formats) for n in range(0, len(read), size)]
        deliver()
        in_flight = tickets
    deliver()
    output.write(join_stage.flush())
    return join_stage, output


def _formats(captured: dict[str, Any]) -> list[str]:
    return [text for _system, text in captured["formats"]]


class _SdkOtlpJsonOutput(OtlpJsonOutput):
    """OTLP/JSON lines as the reader wrote them before: spans and logs built into SDK
    objects (outputs/sdk_objects.py), then the OTLP encoder."""

    def write(self, items: Any) -> None:
        objects, failed = sdk_objects(items)
        self.failed += failed
        super().write(objects)


def replay(
    decoder: RecordDecoder, pages: list[bytes], join_stage: JoinStage, output: Output
) -> dict[str, float]:
    """The reader's loop over ``pages``, read after read: decode, rebuild, write; then the
    records still waiting. Seconds spent in each stage."""
    clock = time.perf_counter
    spent = dict.fromkeys(("decode", "rebuild", "output"), 0.0)
    for first in range(0, len(pages), PAGES_PER_READ):
        start = clock()
        read = decoder.decode_pages(pages[first : first + PAGES_PER_READ])
        decoded = clock()
        rebuilt = join_stage.add(read)
        done = clock()
        output.write(rebuilt)
        written = clock()
        spent["decode"] += decoded - start
        spent["rebuild"] += done - decoded
        spent["output"] += written - done
    output.write(join_stage.flush())
    return spent


def measure(path: Path, repeat: int, workers: tuple[int, ...] = (2,)) -> dict[str, Any]:
    """On the host: pages to a file on disk, end to end, best of ``repeat`` rounds, for the
    spans and then the logs of the capture.

    As ``record`` and ``decode`` run: a read's pages are decoded (``RecordDecoder``),
    rebuilt (``JoinStage``: checked records joined to their resource; the sdk and tree paths
    build SDK objects from them at the output) and
    written (OTLP/JSON lines, or the tree view), read after read; the file is synced at the
    end. Each round runs every path, one after the other, so their ratio comes from one
    run; the two OTLP/JSON files are checked equal. Reading the pages out of the kernel
    (``trace_pipe_raw``, a read(2) per 4 KiB page, measured in the guest) is not included.
    """

    captured = json.loads(path.read_text())
    phases = captured["pages"]
    if isinstance(phases, list):  # a capture of spans only (before logs were captured)
        phases = {"span": phases}
    decoder = RecordDecoder("bench")
    for _system, text in captured["formats"]:
        decoder.add(parse_format(text))
    figures: dict[str, Any] = {"written": captured["written"], "lost": captured["lost"]}
    pools = {}
    try:
        for count in workers:
            started = time.perf_counter()
            pools[count] = WorkerPool(count, ["bench"], decoder.layout)
            pools[count].result(
                pools[count].submit([], _formats(captured))
            )  # started and answering
            figures[f"workers_{count}_start_s"] = time.perf_counter() - started
        for kind, hexed in phases.items():
            pages = [bytes.fromhex(p) for p in hexed]
            figures[kind] = _measure_kind(decoder, pages, kind, repeat, pools, _formats(captured))
    finally:
        for pool in pools.values():
            pool.close()
    return figures


def _measure_kind(
    decoder: RecordDecoder,
    pages: list[bytes],
    kind: str,
    repeat: int,
    pools: dict[int, WorkerPool] | None = None,
    formats: list[str] | None = None,
) -> dict[str, float]:
    best: dict[str, float] = {}
    stages: dict[str, dict[str, float]] = {}
    records = decoder.decode_pages(pages)
    count, total = sum(of_kind(r.kind, kind) for r in records), len(records)
    del records  # streamed, not held: as many objects alive as in the reader
    clock = time.perf_counter
    with tempfile.TemporaryDirectory() as directory:
        files = {name: Path(directory) / name for name in PATHS}
        for _ in range(repeat):
            for name, make in (("direct", OtlpJsonOutput), ("sdk", _SdkOtlpJsonOutput),
                               ("tree", TreeOutput)):  # fmt: skip
                with open(files[name], "w", encoding="utf-8") as out:
                    started = clock()
                    join_stage = JoinStage(resource_wait=float("inf"))
                    output = make(out)
                    spent = replay(decoder, pages, join_stage, output)
                    output.close()
                    out.flush()
                    os.fsync(out.fileno())
                    elapsed = clock() - started
                if elapsed < best.get(name, float("inf")):
                    best[name] = elapsed
                    stages[name] = {stage: t / elapsed for stage, t in spent.items()}
                assert getattr(join_stage.stats, STAT[kind]) == count, f"every {kind} rebuilt"
                assert output.failed == 0 and join_stage.stats.without_resource == 0
            for workers, pool in (pools or {}).items():  # the same rounds, side by side
                name = f"workers_{workers}"
                files[name] = Path(directory) / name
                with open(files[name], "w", encoding="utf-8") as out:
                    started = clock()
                    pooled, pooled_output = _with_workers(pool, pages, formats or [], out)
                    out.flush()
                    os.fsync(out.fileno())
                    elapsed = clock() - started
                best[name] = min(elapsed, best.get(name, float("inf")))
                assert getattr(pooled.stats, STAT[kind]) == count, f"every {kind} rebuilt"
                assert pooled_output.failed == 0 and pooled.stats.without_resource == 0
        direct, sdk = (files[n].read_text().splitlines() for n in ("direct", "sdk"))
        assert direct == sdk, "the two paths write the same OTLP/JSON"
        for workers in pools or {}:
            lines = files[f"workers_{workers}"].read_text().splitlines()
            assert lines == direct, f"{workers} workers write the same OTLP/JSON"
    figures: dict[str, float] = {"pages": len(pages), "records": total, "items": count}
    for name in PATHS:
        figures[f"{name}_per_s"] = count / best[name]
        for stage, share in stages[name].items():
            figures[f"{name}_share_{stage}"] = share
    figures["direct_to_sdk"] = figures["direct_per_s"] / figures["sdk_per_s"]
    for workers in pools or {}:
        rate = count / best[f"workers_{workers}"]
        figures[f"workers_{workers}_per_s"] = rate
        figures[f"workers_{workers}_to_one"] = rate / figures["direct_per_s"]
    return figures


def report(figures: dict[str, Any], workers: list[int]) -> list[str]:
    """The lines ``main`` prints from ``measure``'s figures."""
    lines = [f"{figures['written']:,} records written in the guest, {figures['lost']} lost"]
    for kind, what in WHAT.items():
        if kind not in figures:
            continue
        kind_figures = figures[kind]
        for name, label in PATHS.items():
            shares = ", ".join(
                f"{stage} {kind_figures[f'{name}_share_{stage}']:.0%}"
                for stage in ("decode", "rebuild", "output")
            )
            rate = kind_figures[f"{name}_per_s"]
            goal = ""
            if name == "direct" and kind == "span":
                goal = f" (goal 40,000: {'met' if rate >= 40_000 else 'missed'})"
            lines.append(f"{what}, pages to {label}: {rate:,.0f}/s on one core{goal}; {shares}")
        lines.append(f"{what}, pages to OTLP/JSON lines on disk, the reader now / before: "
                     f"{kind_figures['direct_to_sdk']:.2f}x")  # fmt: skip
        for count in workers:
            if f"workers_{count}_per_s" in kind_figures:
                rate, ratio = (kind_figures[f"workers_{count}_{k}"] for k in ("per_s", "to_one"))
                lines.append(
                    f"{what}, pages to OTLP/JSON lines on disk with {count} workers: "
                    f"{rate:,.0f}/s, {ratio:.2f}x one core (workers started in "
                    f"{figures[f'workers_{count}_start_s']:.2f} s, not counted)"
                )
    if "span" in figures:
        lines.append(f"targets ({os.cpu_count()} CPUs here, the main process on them too): "
                     + "; ".join(targets(figures)))  # fmt: skip
    return lines


def targets(figures: dict[str, Any]) -> list[str]:
    """The issue's targets for pages to OTLP/JSON lines, each met or missed by how much."""
    one = figures["span"]["direct_per_s"]
    two = figures["span"].get("workers_2_to_one")
    met = [f"pages to OTLP/JSON, one core, >= 40,000 spans/s: {one:,.0f}: " + (
        "met" if one >= 40_000 else f"missed by {40_000 - one:,.0f} ({one / 40_000:.2f}x)"
    )]  # fmt: skip
    if two is not None:
        met.append(f"two workers >= 1.8x one core: {two:.2f}x: " + (
            "met" if two >= 1.8 else f"missed by {1.8 - two:.2f}x"
        ))  # fmt: skip
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20000, help="items of each kind")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--capture", metavar="DIR", help=argparse.SUPPRESS)  # in the guest
    parser.add_argument("--pages", metavar="FILE", help="decode pages captured earlier")
    parser.add_argument(
        "--workers",
        type=int,
        nargs="*",
        default=[2],
        metavar="N",
        help="also measure the direct path with N workers (default: 2), side by side",
    )
    options = parser.parse_args()
    if options.capture:
        capture(Path(options.capture), options.spans)
        return 0
    path = Path(options.pages) if options.pages else run_capture(options.spans, Path(__file__))
    if path is None:
        return 1
    print(f"reader_decode: pages in {path} (again: --pages {path})", file=sys.stderr)
    figures = measure(path, options.repeat, tuple(n for n in options.workers if n > 1))
    print(json.dumps(figures, indent=2))
    print("\n".join(report(figures, options.workers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
