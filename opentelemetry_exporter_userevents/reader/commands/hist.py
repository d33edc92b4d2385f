# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents hist``: the kernel counts spans and logs with hist triggers
(:mod:`..hist_collector`); no record is read."""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from opentelemetry_exporter_userevents.reader.commands.common import (
    prefixes_of,
    run_until_stopped,
    say_ready,
    stop_signals,
    tracefs_of,
)
from opentelemetry_exporter_userevents.reader.hist.collector import HistCollector
from opentelemetry_exporter_userevents.reader.hist.view import render
from opentelemetry_exporter_userevents.reader.terminal_text import printable


def hist(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Count until the duration ends, Ctrl-C, SIGTERM or SIGHUP; print the histograms."""
    collector = HistCollector(
        tracefs_of(args), prefixes_of(args), rescan_interval=args.rescan_interval
    )
    started = time.monotonic()
    try:
        with stop_signals() as stop:
            collector.start()
            say_ready(args, collector.instance, err, " as the kernel's counts")

            def poll() -> bool:
                collector.poll()
                return False  # the kernel counts; nothing to read until the end

            deadline = started + args.duration if args.duration else None
            stop_reason = run_until_stopped(poll, deadline, stop, collector.wait)
            result = collector.read()
    finally:
        collector.close()
    render(result.tables, out)
    out.flush()
    for where, reason in sorted(result.problems.items()):
        err.write(f"otel-userevents: not counted: {printable(f'{where}: {reason}')}\n")
    if collector.cleanup_error:
        err.write(f"otel-userevents: {printable(collector.cleanup_error)}\n")
    elapsed = time.monotonic() - started
    counted = len(collector.tracepoints)
    err.write(
        f"otel-userevents: stopped ({stop_reason}): {counted} tracepoints counted by the "
        f"kernel for {elapsed:.1f} s\n"
    )
    err.flush()
    return 0
