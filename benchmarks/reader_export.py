# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Reader speed to an OTLP/HTTP receiver, end to end, from ring-buffer pages captured on a
real kernel: ``otel-userevents record --exporter otlp_proto_http`` on one core.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/reader_export.py

It boots the test bed for a capture, as ``benchmarks/reader_decode.py`` does (spans with 4
attributes and 1 event, then logs with 4 attributes; ``--pages FILE`` times a capture
again, one of reader_decode.py's too), then, on the host, pinned to one core, times the
reader from pages to requests answered by a local OTLP/HTTP receiver (127.0.0.1, another
process pinned to the other core, that reads each body and answers 200 with an empty
response), read after read as ``record`` runs (100 pages a read, about 1,000 spans: one
request per read and signal), both ways side by side in each round:

- ``direct``: checked records to request bytes
  (``reader/outputs/exporters/otlp_proto_direct.py``) posted by the OTLP/HTTP exporter's own
  client (``reader/outputs/exporters/otlp_http_output.py``): the reader now;
- ``sdk``: SDK objects handed to ``OTLPSpanExporter``/``OTLPLogExporter.export`` (the OTLP
  encoder, protobuf, the same client): the reader before.

After the timed part of each round it fetches what the receiver got, checks that every span
or log arrived once, and that both ways sent the same bytes, request by request. It prints
rates (best of ``--repeat`` rounds), each stage's share and the ratio of the two ways.
Needs opentelemetry-exporter-otlp-proto-http.
"""

from __future__ import annotations

import argparse
import gzip
import http.server
import json
import multiprocessing
import os
import struct
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: E402
    ExportLogsServiceRequest,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # noqa: E402
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from benchmarks.reader_capture import STAT, WHAT, of_kind, run_capture  # noqa: E402
from benchmarks.reader_decode import replay  # noqa: E402
from opentelemetry_exporter_userevents.abi import parse_format  # noqa: E402
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder  # noqa: E402
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402

PATHS = {
    "direct": "request bytes straight from checked records, the exporter's client (the reader now)",
    "sdk": "SDK objects to the OTLP/HTTP exporter's export() (the reader before)",
}
GOAL = 20_000
"""Spans/s on one core, pages to an OTLP/HTTP receiver (issue 24, item 3)."""
SIGNAL_PATH = {"span": "/v1/traces", "log": "/v1/logs", "metric": "/v1/metrics"}


def _receive(port: Any, cpu: int | None) -> None:
    """The receiver process: keeps each request's path and body; ``/collect`` hands them
    over (length-prefixed) and forgets them."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    kept: list[tuple[str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == "/collect":
                out = b"".join(struct.pack("<HI", len(p), len(b)) + p.encode() + b for p, b in kept)
                kept.clear()
            else:
                kept.append((self.path, body))
                out = b""
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port.put(server.server_address[1])
    server.serve_forever()


def _collect(url: str) -> list[tuple[str, bytes]]:
    with urllib.request.urlopen(urllib.request.Request(f"{url}/collect", b"")) as answer:
        data = answer.read()
    requests, at = [], 0
    while at < len(data):
        path_size, size = struct.unpack_from("<HI", data, at)
        at += 6
        path = data[at : at + path_size].decode()
        at += path_size
        requests.append((path, data[at : at + size]))
        at += size
    return requests


def _count(kind: str, body: bytes) -> int:
    if kind == "span":
        request = ExportTraceServiceRequest.FromString(body)
        return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
    if kind == "log":
        logs = ExportLogsServiceRequest.FromString(body)
        return sum(len(s.log_records) for r in logs.resource_logs for s in r.scope_logs)
    metrics = ExportMetricsServiceRequest.FromString(body)
    return sum(
        len(getattr(m, m.WhichOneof("data")).data_points)
        for r in metrics.resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
    )


def measure(
    path: Path, repeat: int, cpus: tuple[int, int] | None, compression: str = "none"
) -> dict[str, Any]:
    captured = json.loads(path.read_text())
    phases = captured["pages"]
    decoder = RecordDecoder("bench")
    for _system, text in captured["formats"]:
        decoder.add(parse_format(text))
    context = multiprocessing.get_context("spawn")
    port: Any = context.Queue()
    receiver = context.Process(target=_receive, args=(port, cpus[1] if cpus else None), daemon=True)
    receiver.start()
    url = f"http://127.0.0.1:{port.get(timeout=30)}"
    for name in ("ENDPOINT", "HEADERS", "COMPRESSION", "TIMEOUT"):
        for signal in ("", "TRACES_", "LOGS_"):
            os.environ.pop(f"OTEL_EXPORTER_OTLP_{signal}{name}", None)
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = url
    os.environ["OTEL_EXPORTER_OTLP_COMPRESSION"] = compression
    if cpus:
        os.sched_setaffinity(0, {cpus[0]})
    figures: dict[str, Any] = {"written": captured["written"], "lost": captured["lost"]}
    try:
        for kind, hexed in phases.items():
            pages = [bytes.fromhex(p) for p in hexed]
            figures[kind] = _measure_kind(decoder, pages, kind, repeat, url)
    finally:
        receiver.kill()
        receiver.join()
    return figures


def _measure_kind(
    decoder: RecordDecoder, pages: list[bytes], kind: str, repeat: int, url: str
) -> dict[str, float]:
    best: dict[str, float] = {}
    stages: dict[str, dict[str, float]] = {}
    records = decoder.decode_pages(pages)
    count = sum(of_kind(r.kind, kind) for r in records)
    del records
    clock = time.perf_counter
    sent: dict[str, list[bytes]] = {}
    requests = 0
    for _ in range(repeat):
        for name in PATHS:
            direct = name == "direct"
            output = ExporterOutput("otlp_proto_http", direct=direct)
            assert output.sdk_objects is not direct, "the direct path is there"
            started = clock()
            join_stage = JoinStage(resource_wait=float("inf"))
            spent = replay(decoder, pages, join_stage, output)
            elapsed = clock() - started
            output.close()
            if elapsed < best.get(name, float("inf")):
                best[name] = elapsed
                stages[name] = {stage: t / elapsed for stage, t in spent.items()}
            assert getattr(join_stage.stats, STAT[kind]) == count, f"every {kind} rebuilt"
            assert output.failed == 0 and join_stage.stats.without_resource == 0
            # Outside the timed part: what the receiver got.
            got = _collect(url)
            assert {p for p, _ in got} == {SIGNAL_PATH[kind]}, {p for p, _ in got}
            bodies = [gzip.decompress(b) if b[:2] == b"\x1f\x8b" else b for _, b in got]
            assert sum(_count(kind, body) for body in bodies) == count, f"every {kind} received"
            if name in sent:
                assert bodies == sent[name], "each round sends the same requests"
            sent[name] = bodies
            requests = len(bodies)
    assert sent["direct"] == sent["sdk"], "both ways send the same bytes, request by request"
    figures: dict[str, float] = {"pages": len(pages), "items": count, "requests": requests}
    figures["request_bytes"] = sum(len(b) for b in sent["direct"])
    for name in PATHS:
        figures[f"{name}_per_s"] = count / best[name]
        for stage, share in stages[name].items():
            figures[f"{name}_share_{stage}"] = share
    figures["direct_to_sdk"] = figures["direct_per_s"] / figures["sdk_per_s"]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pages", metavar="FILE", help="time pages captured earlier")
    parser.add_argument(
        "--compression", choices=("none", "gzip"), default="none", help="the exporter's"
    )
    options = parser.parse_args()
    script = ROOT / "benchmarks" / "reader_decode.py"
    path = Path(options.pages) if options.pages else run_capture(options.spans, script)
    if path is None:
        return 2
    print(f"reader_export: pages in {path} (again: --pages {path})", file=sys.stderr)
    available = sorted(os.sched_getaffinity(0))
    cpus = (available[0], available[1]) if len(available) >= 2 else None
    figures = measure(path, options.repeat, cpus, options.compression)
    figures["compression"] = options.compression
    figures["cpus"] = list(cpus) if cpus else "unpinned (one CPU)"
    figures["load_average"] = os.getloadavg()
    print(json.dumps(figures, indent=2))
    print("\n".join(report(figures, options.repeat)))
    return 0


def report(figures: dict[str, Any], repeat: int) -> list[str]:
    """The lines ``main`` prints from ``measure``'s figures."""
    cpus = figures["cpus"]
    reader_cpu, receiver_cpu = (cpus[0], cpus[1]) if isinstance(cpus, list) else ("?", "?")
    lines = [f"{figures['written']:,} records written in the guest, {figures['lost']} lost; "
             f"reader on CPU {reader_cpu}, receiver on CPU {receiver_cpu}; load average "
             f"{figures['load_average'][0]:.2f}"]  # fmt: skip
    for kind, what in WHAT.items():
        if kind not in figures:
            continue
        kind_figures = figures[kind]
        lines.append(f"{what}: {kind_figures['items']:,} in {kind_figures['requests']} "
                     f"requests ({kind_figures['request_bytes']:,} bytes before compression: "
                     f"{figures['compression']}), best of {repeat}")  # fmt: skip
        for name, label in PATHS.items():
            shares = ", ".join(
                f"{stage} {kind_figures[f'{name}_share_{stage}']:.0%}"
                for stage in ("decode", "rebuild", "output")
            )
            rate = kind_figures[f"{name}_per_s"]
            lines.append(f"{what}, pages to an OTLP/HTTP receiver, {label}: {rate:,.0f}/s "
                         f"on one core; {shares}")  # fmt: skip
        lines.append(f"{what}, the reader now / before: {kind_figures['direct_to_sdk']:.2f}x")
    if "span" in figures:
        lines.append("targets: " + "; ".join(targets(figures)))
    return lines


def targets(figures: dict[str, Any]) -> list[str]:
    rate = figures["span"]["direct_per_s"]
    verdict = "met" if rate >= GOAL else f"missed by {GOAL - rate:,.0f} spans/s"
    return [f"pages to OTLP/HTTP, one core, >= {GOAL:,} spans/s: {rate:,.0f} ({rate / GOAL:.2f}x"
            f" the goal): {verdict}"]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
