# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Reader speed, end to end, from ring-buffer pages captured on a real kernel.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_decode.py

It boots the test bed, where spans (4 attributes, 1 event) and then logs (4 attributes) go
through the exporters into a reader's instance and the raw ``trace_pipe_raw`` pages are
saved; then, on the host, it times each stage of the reader on one core, for the spans and
for the logs: decoding those pages into records (``RecordDecoder``: the target is 100,000
records/s), rebuilding them (``Rebuilder``), and writing OTLP/JSON lines to a file on disk
(the goal, end to end: 40,000 spans/s), both ways side by side in one run: checked records
written straight (``otlp_json_direct``, what the reader does) and through SDK objects, the
OTLP encoder and ``MessageToDict`` (what it did before); and the tree view. It prints the
rates, their ratio and each stage's share; then the reader's path with workers (``--workers 2``
by default, more with ``--workers 2 4``), in the same rounds, its file checked equal to
the one-core file, and a ``targets`` line. ``--pages FILE`` measures a capture again.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry._logs import Logger, SeverityNumber  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.trace import Tracer  # noqa: E402

from opentelemetry_exporter_userevents import (  # noqa: E402
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.abi import parse_format  # noqa: E402
from opentelemetry_exporter_userevents.reader import TraceReader  # noqa: E402
from opentelemetry_exporter_userevents.reader.decoder import RecordDecoder  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs import (  # noqa: E402
    OtlpJsonOutput,
    Output,
    TreeOutput,
)
from opentelemetry_exporter_userevents.reader.rebuild import Rebuilder  # noqa: E402
from opentelemetry_exporter_userevents.reader.workers import (  # noqa: E402
    PrecheckedOtlpJsonOutput,
    WorkerPool,
    prechecked,
    trace_records,
)
from testbed import guest  # noqa: E402


def benchmark_span(tracer: Tracer, number: int) -> None:
    """One span of the benchmark's shape, as examples/app.py makes them: 4 attributes, 1
    event."""
    with tracer.start_as_current_span(
        "GET /cart/{id}",
        attributes={"http.request.method": "GET", "url.path": f"/cart/{number}",
                    "http.response.status_code": 200, "user.id": number},
    ) as span:  # fmt: skip
        span.add_event("cart loaded", {"items": number % 5})


def benchmark_log(logger: Logger, number: int) -> None:
    """One log record of the benchmark's shape: 4 attributes, a string body."""
    logger.emit(
        body="cart loaded", severity_number=SeverityNumber.INFO, severity_text="INFO",
        attributes={"http.request.method": "GET", "url.path": f"/cart/{number}",
                    "http.response.status_code": 200, "user.id": number},
    )  # fmt: skip


def capture(path: Path, count: int) -> None:
    """In the guest: write ``count`` spans, then ``count`` logs, while a reader listens;
    save its raw pages, those of each phase apart."""

    resource = Resource({"service.name": "bench"})
    exporter = UserEventsSpanExporter(prefix="bench")
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    tracer = provider.get_tracer("bench", "1.0")
    log_exporter = UserEventsLogExporter(prefix="bench")
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(UserEventsLogRecordProcessor(log_exporter))
    logger = logger_provider.get_logger("bench", "1.0")
    phases: dict[str, list[bytes]] = {"span": [], "log": []}
    with TraceReader(prefix="bench", buffer_size_kb=65536) as reader:
        for kind, write in (("span", benchmark_span), ("log", benchmark_log)):
            pages = phases[kind]
            for number in range(count):
                write(tracer if kind == "span" else logger, number)  # type: ignore[arg-type]
                if number % 1000 == 999:
                    pages += reader.read_pages()
            pages += reader.read_pages()
        formats = reader.formats()
        lost = reader.lost
    written = exporter.stats.written + log_exporter.stats.written
    hexed = {kind: [page.hex() for page in pages] for kind, pages in phases.items()}
    path.write_text(json.dumps({"formats": formats, "lost": lost, "written": written,
                                "pages": hexed}))  # fmt: skip


PATHS = {
    "direct": "OTLP/JSON lines on disk, written straight from checked records (the reader now)",
    "sdk": "OTLP/JSON lines on disk, through SDK objects, the OTLP encoder and MessageToDict "
    "(the reader before)",
    "tree": "the tree view on disk (SDK objects)",
}
PAGES_PER_READ = 100
"""About 1,000 spans: what one read of the capture took."""


def _with_workers(
    pool: WorkerPool, pages: list[bytes], out: Any
) -> tuple[Rebuilder, PrecheckedOtlpJsonOutput]:
    """Pages to OTLP/JSON lines as ``record --workers N`` does: each read's pages split
    into a chunk per worker, one read in flight while the main process rebuilds and
    writes the read before (records in page order, as the one-core path here)."""
    rebuilder = prechecked(Rebuilder(resource_wait=float("inf"), sdk_objects=False))
    output = PrecheckedOtlpJsonOutput(out)
    size = -(-PAGES_PER_READ // pool.count)
    in_flight: list[int] = []

    def deliver() -> None:
        records: list[Any] = []
        for ticket in in_flight:
            records += pool.result(ticket)
        output.write(rebuilder.add(trace_records(records)))

    for first in range(0, len(pages), PAGES_PER_READ):
        read = pages[first : first + PAGES_PER_READ]
        tickets = [pool.submit(read[n : n + size]) for n in range(0, len(read), size)]
        deliver()
        in_flight = tickets
    deliver()
    output.write(rebuilder.flush())
    return rebuilder, output


def replay(
    decoder: RecordDecoder, pages: list[bytes], rebuilder: Rebuilder, output: Output
) -> dict[str, float]:
    """The reader's loop over ``pages``, read after read: decode, rebuild, write; then the
    records still waiting. Seconds spent in each stage."""
    clock = time.perf_counter
    spent = dict.fromkeys(("decode", "rebuild", "output"), 0.0)
    for first in range(0, len(pages), PAGES_PER_READ):
        start = clock()
        read = decoder.decode_pages(pages[first : first + PAGES_PER_READ])
        decoded = clock()
        rebuilt = rebuilder.add(read)
        done = clock()
        output.write(rebuilt)
        written = clock()
        spent["decode"] += decoded - start
        spent["rebuild"] += done - decoded
        spent["output"] += written - done
    output.write(rebuilder.flush())
    return spent


def measure(path: Path, repeat: int, workers: tuple[int, ...] = (2,)) -> dict[str, Any]:
    """On the host: pages to a file on disk, end to end, best of ``repeat`` rounds, for the
    spans and then the logs of the capture.

    As ``record`` and ``decode`` run: a read's pages are decoded (``RecordDecoder``),
    rebuilt (``Rebuilder``: checked records joined to their resource, or SDK objects) and
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
            pools[count].add_formats(text for _system, text in captured["formats"])
            pools[count].result(pools[count].submit([]))  # started and answering
            figures[f"workers_{count}_start_s"] = time.perf_counter() - started
        for kind, hexed in phases.items():
            pages = [bytes.fromhex(p) for p in hexed]
            figures[kind] = _measure_kind(decoder, pages, kind, repeat, pools)
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
) -> dict[str, float]:
    best: dict[str, float] = {}
    stages: dict[str, dict[str, float]] = {}
    records = decoder.decode_pages(pages)
    count, total = sum(r.kind == kind for r in records), len(records)
    del records  # streamed, not held: as many objects alive as in the reader
    clock = time.perf_counter
    with tempfile.TemporaryDirectory() as directory:
        files = {name: Path(directory) / name for name in PATHS}
        for _ in range(repeat):
            for name, make in (("direct", OtlpJsonOutput), ("sdk", OtlpJsonOutput),
                               ("tree", TreeOutput)):  # fmt: skip
                sdk_objects = name != "direct"
                with open(files[name], "w", encoding="utf-8") as out:
                    started = clock()
                    rebuilder = Rebuilder(resource_wait=float("inf"), sdk_objects=sdk_objects)
                    output = make(out)
                    spent = replay(decoder, pages, rebuilder, output)
                    output.close()
                    out.flush()
                    os.fsync(out.fileno())
                    elapsed = clock() - started
                if elapsed < best.get(name, float("inf")):
                    best[name] = elapsed
                    stages[name] = {stage: t / elapsed for stage, t in spent.items()}
                assert getattr(rebuilder.stats, f"{kind}s") == count, f"every {kind} rebuilt"
                assert output.failed == 0 and rebuilder.stats.without_resource == 0
            for workers, pool in (pools or {}).items():  # the same rounds, side by side
                name = f"workers_{workers}"
                files[name] = Path(directory) / name
                with open(files[name], "w", encoding="utf-8") as out:
                    started = clock()
                    rebuilder, output = _with_workers(pool, pages, out)
                    out.flush()
                    os.fsync(out.fileno())
                    elapsed = clock() - started
                best[name] = min(elapsed, best.get(name, float("inf")))
                assert getattr(rebuilder.stats, f"{kind}s") == count, f"every {kind} rebuilt"
                assert output.failed == 0 and rebuilder.stats.without_resource == 0
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--capture", metavar="FILE", help=argparse.SUPPRESS)  # in the guest
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
    if options.pages:
        path = Path(options.pages)
    else:
        kernel = os.environ.get(guest.KERNEL_ENV)
        reason = guest.unavailable_reason(kernel)
        if reason:
            print(f"reader_decode: {reason}", file=sys.stderr)
            return 2
        path = Path(tempfile.mkdtemp()) / "pages.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--spans",
                   str(options.spans), "--capture", "$TESTBED_SHARE/pages.json"]  # fmt: skip
        result = guest.run(
            kernel,
            ["sh", "-c", " ".join(command)],
            timeout=1800,
            keep=lambda share: shutil.copy(share / "pages.json", path),
        )
        if result.returncode != 0:
            print(result.console[-3000:], file=sys.stderr)
            return 1
    print(f"reader_decode: pages in {path} (again: --pages {path})", file=sys.stderr)
    figures = measure(path, options.repeat, tuple(n for n in options.workers if n > 1))
    print(json.dumps(figures, indent=2))
    print(f"{figures['written']:,} records written in the guest, {figures['lost']} lost")
    for kind, what in (("span", "spans"), ("log", "logs")):
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
            print(f"{what}, pages to {label}: {rate:,.0f} {what}/s on one core{goal}; {shares}")
        print(f"{what}, pages to OTLP/JSON lines on disk, the reader now / before: "
              f"{kind_figures['direct_to_sdk']:.2f}x")  # fmt: skip
        for workers in options.workers:
            if f"workers_{workers}_per_s" in kind_figures:
                rate, ratio = (kind_figures[f"workers_{workers}_{k}"] for k in ("per_s", "to_one"))
                print(f"{what}, pages to OTLP/JSON lines on disk with {workers} workers: "
                      f"{rate:,.0f} {what}/s, {ratio:.2f}x one core (workers started in "
                      f"{figures[f'workers_{workers}_start_s']:.2f} s, not counted)")  # fmt: skip
    if "span" in figures:
        one = figures["span"]["direct_per_s"]
        two = figures["span"].get("workers_2_to_one")
        met = f"one core {one:,.0f} spans/s vs 40,000: " + (
            "met" if one >= 40_000 else f"missed by {40_000 - one:,.0f}"
        )
        if two is not None:
            met += f"; two workers {two:.2f}x vs 1.8x: " + (
                "met" if two >= 1.8 else f"missed by {1.8 - two:.2f}x"
            )
        print(f"targets ({os.cpu_count()} CPUs here, the main process on them too): {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
