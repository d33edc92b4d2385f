# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents record``: read our tracepoints through a tracefs instance of its own,
rebuild spans and logs, and write them to an output (or, with ``--capture``, keep the pages;
see :mod:`.capture`)."""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from opentelemetry_exporter_userevents.reader.commands.capture import capture
from opentelemetry_exporter_userevents.reader.commands.common import (
    PROGRESS_INTERVAL,
    discovery_parts,
    output_of,
    prefixes_of,
    rebuilt_parts,
    run_until_stopped,
    stop_signals,
    tracefs_of,
)
from opentelemetry_exporter_userevents.reader.outputs import Output
from opentelemetry_exporter_userevents.reader.private_file import open_private
from opentelemetry_exporter_userevents.reader.process_view import ProcessViews, live_views
from opentelemetry_exporter_userevents.reader.rebuild import Rebuilder
from opentelemetry_exporter_userevents.reader.terminal_text import printable
from opentelemetry_exporter_userevents.reader.trace_reader import TraceReader


def record(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Read until the duration ends, Ctrl-C, SIGTERM or SIGHUP; write what was rebuilt (or,
    with ``--capture``, keep the pages in a trace.dat to decode later)."""
    tracefs = tracefs_of(args)
    reader = TraceReader(
        tracefs, prefixes_of(args), args.filter, args.buffer_size_kb, args.rescan_interval
    )
    if args.capture:
        return capture(args, reader, tracefs, err)
    output = output_of(args, out)
    views: ProcessViews | None = None
    if not args.no_resource_detection:
        views, notes = live_views()
        for note in notes:
            err.write(f"otel-userevents: {note}\n")
    rebuilder = Rebuilder(
        resource_wait=args.resource_wait, sdk_objects=output.sdk_objects, process_views=views
    )
    started = time.monotonic()
    try:
        with stop_signals() as stop:
            reader.start()
            for name, reason in {**reader.filter_rejected, **reader.incompatible}.items():
                err.write(f"otel-userevents: not recording {printable(f'{name}: {reason}')}\n")
            if reader.announcement_error:
                err.write(f"otel-userevents: {printable(reader.announcement_error)}\n")
            if args.ready_file:  # tests and scripts wait for this before they start writing
                with open_private(args.ready_file) as f:
                    f.write(reader.instance)
            next_progress = started + PROGRESS_INTERVAL

            def rebuild() -> bool:
                nonlocal next_progress
                records = reader.read()
                output.write(rebuilder.add(records))
                now = time.monotonic()
                if (args.progress or err.isatty()) and now >= next_progress:
                    err.write(_summary(reader, rebuilder, output, started, "") + "\n")
                    err.flush()
                    next_progress = now + PROGRESS_INTERVAL
                return bool(records)

            deadline = started + args.duration if args.duration else None
            stop_reason = run_until_stopped(rebuild, deadline, stop, reader.wait)
            output.write(rebuilder.add(reader.read()))
            output.write(rebuilder.flush())
    finally:
        reader.close()
        output.close()
    if reader.cleanup_error:
        err.write(f"otel-userevents: {printable(reader.cleanup_error)}\n")
    err.write(_summary(reader, rebuilder, output, started, stop_reason) + "\n")
    err.flush()
    return 0


def _summary(
    reader: TraceReader, rebuilder: Rebuilder, output: Output, started: float, stop: str
) -> str:
    elapsed = time.monotonic() - started
    decoded = reader.decoder.stats
    rate = decoded.records / elapsed if elapsed > 0 else 0.0
    lost = f"lost {reader.lost}"
    if reader.first_loss is not None and reader.last_loss is not None:
        first, last = reader.first_loss - started, reader.last_loss - started
        lost += f" (behind its writers, seen from {first:.1f} s to {last:.1f} s)"
    parts = [
        f"{decoded.records} records in {elapsed:.1f} s ({rate:.0f}/s)",
        lost,
        *rebuilt_parts(rebuilder, decoded, output),
        *discovery_parts(reader),
    ]
    head = "otel-userevents: " + ("stopped (" + stop + "): " if stop else "")
    return head + ", ".join(parts)
