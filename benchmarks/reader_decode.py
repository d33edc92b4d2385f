# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Reader decoding speed, from ring-buffer pages captured on a real kernel.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_decode.py

It boots the test bed, where examples-like spans (4 attributes, 1 event) go through the
exporter into a reader's instance and the raw ``trace_pipe_raw`` pages are saved; then, on
the host, it times decoding those pages into records (``RecordDecoder``: the target is
100,000 records/s on one core) and rebuilding records into ReadableSpans (``Rebuilder``),
and prints both rates.
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

from opentelemetry_exporter_userevents import (  # noqa: E402
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.abi import parse_format  # noqa: E402
from opentelemetry_exporter_userevents.reader import TraceReader  # noqa: E402
from opentelemetry_exporter_userevents.reader.decoder import RecordDecoder  # noqa: E402
from opentelemetry_exporter_userevents.reader.rebuild import Rebuilder  # noqa: E402
from testbed import guest  # noqa: E402


def capture(path: Path, count: int) -> None:
    """In the guest: write ``count`` spans while a reader listens; save its raw pages."""

    exporter = UserEventsSpanExporter(prefix="bench")
    provider = TracerProvider(resource=Resource({"service.name": "bench"}))
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    tracer = provider.get_tracer("bench", "1.0")
    pages: list[bytes] = []
    with TraceReader(prefix="bench", buffer_size_kb=65536) as reader:
        for number in range(count):
            with tracer.start_as_current_span(
                "GET /cart/{id}",
                attributes={"http.request.method": "GET", "url.path": f"/cart/{number}",
                            "http.response.status_code": 200, "user.id": number},
            ) as span:  # fmt: skip
                span.add_event("cart loaded", {"items": number % 5})
            if number % 1000 == 999:
                pages += reader.read_pages()
        pages += reader.read_pages()
        formats = reader.formats()
        lost = reader.lost
    path.write_text(json.dumps({"formats": formats, "pages": [p.hex() for p in pages],
                                "lost": lost, "written": exporter.stats.written}))  # fmt: skip


def measure(path: Path, repeat: int) -> dict[str, float]:
    """On the host: records/s of page decoding and of rebuilding."""

    captured = json.loads(path.read_text())
    pages = [bytes.fromhex(p) for p in captured["pages"]]
    decoder = RecordDecoder("bench")
    for text in captured["formats"]:
        decoder.add(parse_format(text))
    best_decode = best_rebuild = float("inf")
    records = []
    for _ in range(repeat):
        start = time.perf_counter()
        records = decoder.decode_pages(pages)
        best_decode = min(best_decode, time.perf_counter() - start)
        start = time.perf_counter()
        rebuilt = Rebuilder().add(records)
        best_rebuild = min(best_rebuild, time.perf_counter() - start)
    spans = sum(1 for record in records if record.kind == "span")
    assert len(rebuilt) == spans, "every span rebuilt"
    return {
        "pages": len(pages),
        "records": len(records),
        "spans": spans,
        "written": captured["written"],
        "lost": captured["lost"],
        "decode_records_per_s": len(records) / best_decode,
        "rebuild_records_per_s": len(records) / best_rebuild,
    }


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
