# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Reader speed, end to end, from ring-buffer pages captured on a real kernel.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_decode.py

It boots the test bed, where examples-like spans (4 attributes, 1 event) go through the
exporter into a reader's instance and the raw ``trace_pipe_raw`` pages are saved; then, on
the host, it times each stage of the reader on one core: decoding those pages into records
(``RecordDecoder``: the target is 100,000 records/s), rebuilding records into ReadableSpans
(``Rebuilder``), and writing OTLP/JSON lines or the tree view to a file (the goal, end to
end: 40,000 spans/s), and prints the rates and each stage's share.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.trace import Tracer  # noqa: E402

from opentelemetry_exporter_userevents import (  # noqa: E402
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.abi import parse_format  # noqa: E402
from opentelemetry_exporter_userevents.reader import TraceReader  # noqa: E402
from opentelemetry_exporter_userevents.reader.decoder import RecordDecoder  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs import OtlpJsonOutput, TreeOutput  # noqa: E402
from opentelemetry_exporter_userevents.reader.rebuild import Rebuilder  # noqa: E402
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


def capture(path: Path, count: int) -> None:
    """In the guest: write ``count`` spans while a reader listens; save its raw pages."""

    exporter = UserEventsSpanExporter(prefix="bench")
    provider = TracerProvider(resource=Resource({"service.name": "bench"}))
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    tracer = provider.get_tracer("bench", "1.0")
    pages: list[bytes] = []
    with TraceReader(prefix="bench", buffer_size_kb=65536) as reader:
        for number in range(count):
            benchmark_span(tracer, number)
            if number % 1000 == 999:
                pages += reader.read_pages()
        pages += reader.read_pages()
        formats = reader.formats()
        lost = reader.lost
    path.write_text(json.dumps({"formats": formats, "pages": [p.hex() for p in pages],
                                "lost": lost, "written": exporter.stats.written}))  # fmt: skip


def measure(path: Path, repeat: int) -> dict[str, float]:
    """On the host: each stage of the reader, pages to output, best of ``repeat`` runs.

    Stages: decode (pages to records), rebuild (records to ReadableSpan), then either
    OTLP/JSON lines written to a file on disk, or the tree view written to a file. Reading
    the pages out of the kernel (``trace_pipe_raw``) is not included: it is a read(2) per
    4 KiB page, measured in the guest, not here.
    """

    captured = json.loads(path.read_text())
    pages = [bytes.fromhex(p) for p in captured["pages"]]
    decoder = RecordDecoder("bench")
    for _system, text in captured["formats"]:
        decoder.add(parse_format(text))
    best = dict.fromkeys(("decode", "rebuild", "otlp_json", "tree"), float("inf"))
    records: list = []
    rebuilt: list = []
    with tempfile.TemporaryDirectory() as directory:
        for _ in range(repeat):
            start = time.perf_counter()
            records = decoder.decode_pages(pages)
            best["decode"] = min(best["decode"], time.perf_counter() - start)
            start = time.perf_counter()
            rebuilt = Rebuilder().add(records)
            best["rebuild"] = min(best["rebuild"], time.perf_counter() - start)
            for stage, make in (("otlp_json", OtlpJsonOutput), ("tree", TreeOutput)):
                with open(Path(directory) / stage, "w", encoding="utf-8") as out:
                    output = make(out)
                    start = time.perf_counter()
                    for batch in range(0, len(rebuilt), 1000):  # as record writes, per read
                        output.write(rebuilt[batch : batch + 1000])
                    output.close()
                    out.flush()
                    os.fsync(out.fileno())
                    best[stage] = min(best[stage], time.perf_counter() - start)
    spans = sum(1 for record in records if record.kind == "span")
    assert len(rebuilt) == spans, "every span rebuilt"
    figures: dict[str, float] = {
        "pages": len(pages),
        "records": len(records),
        "spans": spans,
        "written": captured["written"],
        "lost": captured["lost"],
        "decode_records_per_s": len(records) / best["decode"],
        "rebuild_records_per_s": len(records) / best["rebuild"],
    }
    for output in ("otlp_json", "tree"):
        total = best["decode"] + best["rebuild"] + best[output]
        figures[f"end_to_end_{output}_spans_per_s"] = spans / total
        for stage in ("decode", "rebuild", output):
            figures[f"share_{output}_{stage}"] = best[stage] / total
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--capture", metavar="FILE", help=argparse.SUPPRESS)  # in the guest
    parser.add_argument("--pages", metavar="FILE", help="decode pages captured earlier")
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
    figures = measure(path, options.repeat)
    print(json.dumps(figures, indent=2))
    target = figures["decode_records_per_s"] >= 100_000
    print(f"reader decoding: {figures['decode_records_per_s']:,.0f} records/s "
          f"(target 100,000: {'met' if target else 'missed'}); rebuilding into "
          f"ReadableSpan: {figures['rebuild_records_per_s']:,.0f} records/s")  # fmt: skip
    for output, stage in (("otlp_json", "OTLP/JSON lines on disk"), ("tree", "the tree view")):
        rate = figures[f"end_to_end_{output}_spans_per_s"]
        shares = ", ".join(
            f"{name} {figures[f'share_{output}_{name}']:.0%}" for name in ("decode", "rebuild")
        )
        print(f"end to end, pages to {stage}: {rate:,.0f} spans/s on one core "
              f"(goal 40,000: {'met' if rate >= 40_000 else 'missed'}); {shares}, "
              f"output {figures[f'share_{output}_{output}']:.0%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
