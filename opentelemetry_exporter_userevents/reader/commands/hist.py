# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents hist``: the kernel counts spans and logs with hist triggers
(:mod:`..hist_collector`); no record is read."""

from __future__ import annotations

import argparse
import signal
import time
from typing import TextIO

from opentelemetry_exporter_userevents.reader.commands.common import (
    POLL_INTERVAL,
    Stop,
    prefixes_of,
    raise_stop,
    tracefs_of,
)
from opentelemetry_exporter_userevents.reader.hist_collector import HistCollector
from opentelemetry_exporter_userevents.reader.hist_view import render


def hist(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Count until the duration ends, Ctrl-C, SIGTERM or SIGHUP; print the histograms."""
    collector = HistCollector(
        tracefs_of(args), prefixes_of(args), rescan_interval=args.rescan_interval
    )
    previous = {s: signal.signal(s, raise_stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    started = time.monotonic()
    stop_reason = "duration"
    try:
        collector.start()
        if args.ready_file:  # tests and scripts wait for this before they start writing
            with open(args.ready_file, "w") as f:
                f.write(collector.instance)
        deadline = started + args.duration if args.duration else None
        try:
            while deadline is None or time.monotonic() < deadline:
                collector.poll()
                time.sleep(POLL_INTERVAL)
        except KeyboardInterrupt:
            stop_reason = "interrupted"
        except Stop as signalled:
            stop_reason = str(signalled)
        result = collector.read()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        collector.close()
    render(result.tables, out)
    out.flush()
    for where, reason in sorted(result.problems.items()):
        err.write(f"otel-userevents: not counted: {where}: {reason}\n")
    if collector.cleanup_error:
        err.write(f"otel-userevents: {collector.cleanup_error}\n")
    elapsed = time.monotonic() - started
    counted = len(collector.tracepoints)
    err.write(
        f"otel-userevents: stopped ({stop_reason}): {counted} tracepoints counted by the "
        f"kernel for {elapsed:.1f} s\n"
    )
    err.flush()
    return 0
