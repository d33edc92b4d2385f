# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``decode --kernel``: a capture's spans with what the kernel did for their threads, from
the scheduler's and syscalls' records the same file holds.

Two passes over the file: the first counts the kernel's records by group, notes each CPU's
first record and the losses, and estimates the clock from our spans
(:mod:`..views.kernel_capture_clock`); the second feeds the kernel's records to the
timeline and ours to the rebuilder, in time order, each at most :data:`.BATCH` records
behind the other (so a span is summed once every kernel record before its own is in)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TextIO

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.reader.capture import DecodedCapture
from opentelemetry_exporter_userevents.reader.capture.decode import BATCH
from opentelemetry_exporter_userevents.reader.capture.raw_events import RawEvent
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats, TraceRecord
from opentelemetry_exporter_userevents.reader.join.rebuild import Rebuilder
from opentelemetry_exporter_userevents.reader.outputs.output import Output
from opentelemetry_exporter_userevents.reader.terminal_text import printable
from opentelemetry_exporter_userevents.reader.views.kernel_capture import CaptureKernelEvents
from opentelemetry_exporter_userevents.reader.views.kernel_capture_clock import (
    ClockEstimate,
    clock_line,
    map_clock,
)
from opentelemetry_exporter_userevents.reader.views.kernel_events import parse_groups
from opentelemetry_exporter_userevents.reader.views.kernel_view import KernelView, kernel_parts

__all__ = ["kernel_notes", "kernel_parts", "kernel_view_of"]

SPAN = "span"


def kernel_view_of(
    args: argparse.Namespace, decoded: DecodedCapture, err: TextIO
) -> Callable[[Rebuilder, Output], None]:
    """The view, and the loop that decodes the file with it (after the first pass)."""
    raw = decoded.raw
    assert raw is not None
    events = CaptureKernelEvents(decoded.capture_formats, parse_groups(args.kernel),
                                 decoded.decoder.layout)  # fmt: skip
    ours = set()
    for text in decoded.formats + decoded.other_formats:
        try:
            ours.add(parse_format(text).id)
        except ValueError:
            continue
    events.forget_ids(ours)  # a kernel event that claims one of our ids is not read as it
    for reason in events.refused:
        err.write(f"otel-userevents: kernel view: not reading {printable(reason)}\n")
    decoder = decoded.decoder
    estimate = ClockEstimate()
    found: list[TraceRecord] = []
    for event in (raw.unordered or raw.stream)(DecoderStats()):
        if events.is_kernel(event.record):
            events.census(event.stamp, event.cpu, event.record)
        elif decoder.decode_record(event.stamp, event.record, found):
            record = found.pop()
            if record.kind == SPAN:
                estimate.add(record.timestamp, record.pid, record.values.get("end_time_ns"))
    decoder.stats = DecoderStats()  # the second pass counts
    clock = map_clock(raw.clock, raw.reference, estimate)
    events.cover(clock, raw.missing_cpus, list(raw.losses))
    groups = ", ".join(events.groups)
    err.write(f"otel-userevents: kernel view ({groups}) from the capture: "
              f"{printable(clock_line(clock))}\n")  # fmt: skip
    view = KernelView(events, int(args.kernel_wait_threshold * 1_000_000))

    def run(rebuilder: Rebuilder, output: Output) -> None:
        rebuilder.span_enricher = view
        kernel: list[RawEvent] = []
        records: list[TraceRecord] = []
        for event in raw.stream(decoder.stats):
            if events.is_kernel(event.record):
                kernel.append(event)
                if len(kernel) < BATCH:
                    continue
            else:
                decoder.decode_record(event.stamp, event.record, records)
                if len(records) < BATCH:
                    continue
            events.take(kernel)
            output.write(rebuilder.add(records))
            kernel, records = [], []
        events.take(kernel)
        output.write(rebuilder.add(records))

    return run


def kernel_notes(rebuilder: Rebuilder) -> list[str]:
    """Why spans were partial, once each."""
    view = rebuilder.span_enricher
    if isinstance(view, KernelView) and isinstance(view.events, CaptureKernelEvents):
        return view.events.notes()
    return []
