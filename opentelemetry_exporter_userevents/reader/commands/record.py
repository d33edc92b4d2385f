# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents record``: read our tracepoints through a tracefs instance of its own,
rebuild spans and logs, and write them to an output (or, with ``--capture``, keep the pages;
see :mod:`.capture`)."""

from __future__ import annotations

import argparse
import signal
import time
from typing import TextIO

from opentelemetry_exporter_userevents.reader.commands.capture import capture
from opentelemetry_exporter_userevents.reader.commands.common import (
    POLL_INTERVAL,
    PROGRESS_INTERVAL,
    Stop,
    output_of,
    prefixes_of,
    raise_stop,
    rebuilt_parts,
    tracefs_of,
)
from opentelemetry_exporter_userevents.reader.outputs import Output
from opentelemetry_exporter_userevents.reader.rebuild import Rebuilder
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
    rebuilder = Rebuilder(resource_wait=args.resource_wait)
    previous = {s: signal.signal(s, raise_stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    started = time.monotonic()
    stop_reason = "duration"
    try:
        reader.start()
        for name, reason in {**reader.filter_rejected, **reader.incompatible}.items():
            err.write(f"otel-userevents: not recording {name}: {reason}\n")
        if args.ready_file:  # tests and scripts wait for this before they start writing
            with open(args.ready_file, "w") as f:
                f.write(reader.instance)
        deadline = started + args.duration if args.duration else None
        next_progress = started + PROGRESS_INTERVAL
        while True:
            try:
                records = reader.read()
                output.write(rebuilder.add(records))
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                if (args.progress or err.isatty()) and now >= next_progress:
                    err.write(_summary(reader, rebuilder, output, started, "") + "\n")
                    err.flush()
                    next_progress = now + PROGRESS_INTERVAL
                if not records:
                    time.sleep(POLL_INTERVAL)
            except KeyboardInterrupt:
                stop_reason = "interrupted"
                break
            except Stop as signalled:
                stop_reason = str(signalled)
                break
        output.write(rebuilder.add(reader.read()))
        output.write(rebuilder.flush())
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        reader.close()
        output.close()
    if reader.cleanup_error:
        err.write(f"otel-userevents: {reader.cleanup_error}\n")
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
    ]
    head = "otel-userevents: " + ("stopped (" + stop + "): " if stop else "")
    return head + ", ".join(parts)
