# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Peak memory of ``otel-userevents decode FILE -o /dev/null``, by capture size.

One command, on the host (no kernel needed):

    .venv/bin/python benchmarks/capture_memory.py --sizes 64,256,1024 --baseline 239ba3b

It writes trace.dat captures of span records (examples-like spans: 4 attributes, 1 event;
written with ``TraceDatWriter``, as ``record --capture`` does, two CPUs) of each size under
a temporary directory, decodes each in a process of its own, and prints that process's
peak resident size (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` of a parent that ran only
it), its time and records/s. With ``--baseline REV``, the same files are decoded by the
reader as it was at git revision ``REV`` too (extracted with ``git archive``), side by side,
up to ``--baseline-max-mib`` (it holds every record in memory: a large capture could
exhaust the machine). The captures are deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from benchmarks.reader_capture import benchmark_span  # noqa: E402
from opentelemetry_exporter_userevents._export.span_encoder import encode_span  # noqa: E402
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD  # noqa: E402
from opentelemetry_exporter_userevents.reader.capture import TraceDatWriter  # noqa: E402
from opentelemetry_exporter_userevents.record import anyvalue, schema  # noqa: E402
from opentelemetry_exporter_userevents.record.resource_id import hash_resource  # noqa: E402
from tests.support.captures import HEADER_EVENT, format_text  # noqa: E402
from tests.support.pages import HEADER_PAGE, data_event, page, record  # noqa: E402

SPAN_ID, RESOURCE_ID = 301, 303
PAGE_SIZE = 4096
MULTI = "user_events_multi"
FORMATS = [
    (MULTI, format_text(schema.SPAN, "bench_span.1f", SPAN_ID)),
    (MULTI, format_text(schema.RESOURCE, "bench_resource.1f", RESOURCE_ID)),
]


def span_records(resource_id: int) -> list[bytes]:
    """Trace records of examples-like spans, as the exporter encodes them."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "bench"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench", "1.0")
    for number in range(16):
        benchmark_span(tracer, number)
    return [
        record(SPAN_ID, encode_span(span, resource_id, FTRACE_MAX_PAYLOAD)[0])
        for span in memory.get_finished_spans()
    ]


def resource_record() -> tuple[int, bytes]:
    resource = Resource({"service.name": "bench"})
    attributes = anyvalue.encode(dict(resource.attributes)).encode()
    url = resource.schema_url.encode()
    resource_id = hash_resource(attributes, url)
    payload = schema.RESOURCE.pack((resource_id, 1000), (attributes, url))
    return resource_id, record(RESOURCE_ID, payload)


def build(path: str, size: int) -> dict[str, int]:
    """A trace.dat of about ``size`` bytes: the resource record, then pages full of span
    records, alternating between two CPUs, times increasing."""
    resource_id, resource_raw = resource_record()
    spans = span_records(resource_id)
    bodies: list[list[bytes]] = []  # the events of each distinct page
    events: list[bytes] = []
    used = 16
    for raw in spans * 8:
        event = data_event(10, raw)
        if used + len(event) > PAGE_SIZE:
            bodies.append(events)
            events, used = [], 16
        events.append(event)
        used += len(event)
    writer = TraceDatWriter(path, PAGE_SIZE, HEADER_PAGE, HEADER_EVENT)
    writer.add_page(0, page(1000, [data_event(0, resource_raw)]))
    pages = max(1, size // PAGE_SIZE)
    records = 1
    for number in range(pages):
        events = bodies[number % len(bodies)]
        writer.add_page(number % 2, page(2000 + 1000 * number, events))
        records += len(events)
    for system, text in FORMATS:
        writer.add_format(system, text)
    writer.close("1 bench\n")
    return {"pages": pages + 1, "records": records, "bytes": os.path.getsize(path)}


def measure(tree: Path, capture: str) -> dict[str, Any]:
    """Decode ``capture`` with the reader in ``tree``, in a child of a process that runs
    nothing else: that process's RUSAGE_CHILDREN is the decode's alone."""
    script = (
        "import json, resource, subprocess, sys, time\n"
        "start = time.monotonic()\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps({'maxrss_kib': usage.ru_maxrss, 'seconds': time.monotonic() - start,"
        " 'exit': done.returncode, 'stderr': done.stderr[-2000:]}))\n"
    )
    cli = "import sys\nfrom opentelemetry_exporter_userevents.reader import cli\n"
    cli += "sys.exit(cli.main())"  # otel-userevents, from this tree
    command = [sys.executable, "-c", cli, "decode", capture, "-o", os.devnull]
    env = dict(os.environ, PYTHONPATH=str(tree))
    result = subprocess.run(
        [sys.executable, "-c", script, *command],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, Any] = json.loads(result.stdout)
    return figures


def baseline_tree(revision: str, directory: str) -> Path:
    """The repository at ``revision``, extracted (``git archive``) under ``directory``."""
    tree = Path(directory) / f"tree-{revision}"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,1024", help="capture sizes in MiB")
    parser.add_argument("--baseline", metavar="REV", help="also decode with the reader at REV")
    parser.add_argument("--baseline-max-mib", type=int, default=256)
    parser.add_argument("--dir", help="where to write the captures (default: a temp dir)")
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="capture-memory-", dir=options.dir) as directory:
        baseline = baseline_tree(options.baseline, directory) if options.baseline else None
        for mib in (int(size) for size in options.sizes.split(",")):
            path = os.path.join(directory, f"capture-{mib}.dat")
            started = time.monotonic()
            built = build(path, mib << 20)
            print(f"built {mib} MiB: {built} in {time.monotonic() - started:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
            trees = [("this tree", ROOT)]
            if baseline is not None and mib <= options.baseline_max_mib:
                trees.append((options.baseline, baseline))
            for label, tree in trees:
                figures = measure(tree, path)
                row = {"capture_mib": mib, "reader": label, **built, **figures}
                row["records_per_s"] = built["records"] / figures["seconds"]
                rows.append(row)
                print(f"  {label}: peak RSS {figures['maxrss_kib'] / 1024:.0f} MiB, "
                      f"{figures['seconds']:.1f} s, exit {figures['exit']}",
                      file=sys.stderr, flush=True)  # fmt: skip
            os.unlink(path)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rows": rows, "builder_maxrss_kib": own}, indent=2))
    heads = ("capture", "reader", "records", "peak RSS", "time", "records/s")
    widths = (9, 12, 10, 10, 8, 10)
    print(" ".join(f"{head:>{width}}" for head, width in zip(heads, widths, strict=True)))
    for row in rows:
        print(f"{row['capture_mib']:>5} MiB {row['reader']:>12} {row['records']:>10,} "
              f"{row['maxrss_kib'] / 1024:>6.0f} MiB {row['seconds']:>6.1f} s "
              f"{row['records_per_s']:>10,.0f}")  # fmt: skip
    return 0 if all(row["exit"] == 0 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
