# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Captures: ``record --capture FILE`` keeps pages and format files in a trace.dat, and
``otel-userevents decode FILE`` rebuilds spans and logs from a trace.dat or perf.data as
``record`` would have written them."""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.reader.capture import TraceDatWriter, decode_file
from opentelemetry_exporter_userevents.reader.commands.common import (
    output_of,
    prefixes_of,
    rebuilt_parts,
    run_until_stopped,
    stop_signals,
)
from opentelemetry_exporter_userevents.reader.rebuild import Rebuilder
from opentelemetry_exporter_userevents.reader.trace_reader import TraceReader


def capture(args: argparse.Namespace, reader: TraceReader, tracefs: Tracefs, err: TextIO) -> int:
    """``record --capture FILE``: pages and format files to a trace.dat, no decoding (so
    a burst is kept whole however slow decoding would be); ``decode`` rebuilds it later."""
    started = time.monotonic()
    writer: TraceDatWriter | None = None
    try:
        with stop_signals() as stop:
            reader.start()
            writer = TraceDatWriter(
                args.capture,
                reader.decoder.layout.page_size,
                tracefs.header_page(),
                tracefs.header_event(),
            )
            if args.ready_file:
                with open(args.ready_file, "w") as f:
                    f.write(reader.instance)

            def keep_pages() -> bool:
                pages = reader.capture()
                for cpu, page in pages:
                    writer.add_page(cpu, page)
                return bool(pages)

            deadline = started + args.duration if args.duration else None
            stop_reason = run_until_stopped(keep_pages, deadline, stop)
            for cpu, page in reader.read_cpu_pages():
                writer.add_page(cpu, page)
    finally:
        if writer is not None:
            for system, text in reader.formats():
                writer.add_format(system, text)
            writer.close(tracefs.saved_cmdlines())
        reader.close()
    kept = writer.pages if writer else 0
    err.write(
        f"otel-userevents: stopped ({stop_reason}): {kept} pages "
        f"({kept * reader.decoder.layout.page_size / 1048576:.1f} MiB) of "
        f"{len(reader.tracepoints)} tracepoints captured to {args.capture} "
        f"(trace.dat v6), lost {reader.lost}; rebuild with: otel-userevents decode "
        f"{args.capture}\n"
    )
    return 0


def decode(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Rebuild what a trace.dat or perf.data holds, as ``record`` would have written it."""
    started = time.monotonic()
    decoded = decode_file(args.file, prefixes_of(args, every_by_default=True))
    for name, reason in decoded.incompatible.items():
        err.write(f"otel-userevents: not decoding {name}: {reason}\n")
    for note in decoded.notes:
        err.write(f"otel-userevents: {note}\n")
    output = output_of(args, out)
    rebuilder = Rebuilder(resource_wait=float("inf"))  # the whole file is there: no waiting
    try:
        output.write(rebuilder.add(decoded.records))
        output.write(rebuilder.flush())
    finally:
        output.close()
    stats = decoded.decoder.stats
    elapsed = time.monotonic() - started
    head = f"otel-userevents: {args.file} ({decoded.kind}): "
    parts = [
        f"{stats.records} records of {len(decoded.tracepoints)} tracepoints in {elapsed:.1f} s",
        f"{stats.pages_with_missed_events} pages after lost events",
        *rebuilt_parts(rebuilder, stats, output),
    ]
    err.write(head + ", ".join(parts) + "\n")
    if not decoded.tracepoints:
        err.write("otel-userevents: the file holds no tracepoints of ours (see --prefix)\n")
    return 0
