# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents record``: read our tracepoints through a tracefs instance of its own,
rebuild spans and logs, and hand them to the output's stage, whose thread writes them
(:mod:`..outputs.output_stage`: reading never waits on a collector; or, with ``--capture``,
keep the pages; see :mod:`.capture`)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, TextIO

from opentelemetry_exporter_userevents.reader.commands.common import (
    POLL_INTERVAL,
    PROGRESS_INTERVAL,
    UsageError,
    core_part,
    discovery_parts,
    native_of,
    output_of,
    prefixes_of,
    providers_of,
    rate,
    rebuilt_parts,
    run_until_stopped,
    say_ready,
    stop_signals,
    tracefs_of,
    workers_of,
)
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import OutputStage
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Spool
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput, Output
from opentelemetry_exporter_userevents.reader.pipeline.decode_stage import DecodeStage
from opentelemetry_exporter_userevents.reader.pipeline.live_source import LiveSource
from opentelemetry_exporter_userevents.reader.pipeline.pipeline import Pipeline
from opentelemetry_exporter_userevents.reader.pipeline.worker_pool import WorkerError
from opentelemetry_exporter_userevents.reader.terminal_text import printable
from opentelemetry_exporter_userevents.reader.views.process_view import ProcessViews, live_views
from opentelemetry_exporter_userevents.record.tracepoints import RESOURCE_KIND

if TYPE_CHECKING:  # imported when chosen (--capture, --kernel, the health metrics), so that
    # a reader without them starts sooner
    from opentelemetry_exporter_userevents.reader.outputs.health_metrics import HealthReporter
    from opentelemetry_exporter_userevents.reader.views.kernel_view import KernelView

HEALTH_FILE_WAIT = 0.25
"""Seconds the stop waits for the last health file past its deadline at most (a disk that
stalls: no longer; it takes milliseconds otherwise)."""


def record(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Read until the duration ends, Ctrl-C, SIGTERM or SIGHUP; write what was rebuilt (or,
    with ``--capture``, keep the pages in a trace.dat to decode later)."""
    if args.spool is not None and not args.exporter:  # before anything is set up
        raise UsageError("--spool keeps OTLP/HTTP requests: use it with --exporter")
    tracefs = tracefs_of(args)
    reader = TraceReader(
        tracefs,
        prefixes_of(args),
        args.filter,
        args.buffer_size_kb,
        args.rescan_interval,
        providers=providers_of(args),
    )
    if args.capture:
        from opentelemetry_exporter_userevents.reader.commands.capture import (  # noqa: PLC0415
            capture,
        )

        return capture(args, reader, tracefs, err)
    if args.kernel:
        from opentelemetry_exporter_userevents.reader.views.kernel_events import (  # noqa: PLC0415
            KernelEvents,
            parse_groups,
        )
        from opentelemetry_exporter_userevents.reader.views.kernel_view import (  # noqa: PLC0415
            KernelView,
            kernel_clock_line,
        )
    groups = parse_groups(args.kernel) if args.kernel else None
    workers = workers_of(args)
    destination = output_of(args, out, workers)
    if args.spool is not None:
        if not isinstance(destination, ExporterOutput):
            raise UsageError("--spool keeps OTLP/HTTP requests: use it with --exporter")
        destination.use_spool(Spool(args.spool, args.spool_max_mb * 1024 * 1024))
    output = OutputStage(
        destination,
        args.stop_timeout,
        max_batches=args.sending_queue_size,
        max_bytes=args.sending_queue_max_mb * 1024 * 1024,
    )
    views: ProcessViews | None = None
    if not args.no_resource_detection:
        views, notes = live_views()
        for note in notes:
            err.write(f"otel-userevents: {note}\n")
    kernel: KernelView | None = None
    if groups is not None:
        events = KernelEvents(reader.tracefs, reader.decoder.layout, groups)
        events.timeline.budget.per_process = args.kernel_budget
        kernel = KernelView(events, int(args.kernel_wait_threshold * 1_000_000))
    join_stage = JoinStage(
        resource_wait=args.resource_wait,
        process_views=views,
        span_enricher=kernel,
    )
    started = time.monotonic()
    health = _health_reporter(args, destination, started)
    pipeline = Pipeline(
        DecodeStage(
            reader.decoder,
            workers,
            encode_spans=kernel is None,
            native=native_of(destination, kernel is not None),
        ),
        join_stage,
        output,
        LiveSource(reader),
        kernel,
    )
    stop_reason = "error"
    failed: WorkerError | None = None
    try:
        with stop_signals() as stop:
            reader.start()
            if kernel is not None:
                kernel.events.layout = reader.decoder.layout
                kernel.events.start()
                reader.on_announced = kernel.events.watch_announced
                err.write(f"otel-userevents: {kernel_clock_line(kernel.events)}\n")
            for line in filter_report(reader):
                err.write(f"otel-userevents: {printable(line)}\n")
            for name, reason in reader.incompatible.items():
                err.write(f"otel-userevents: not recording {printable(f'{name}: {reason}')}\n")
            if reader.announcement_error:
                err.write(f"otel-userevents: {printable(reader.announcement_error)}\n")
            say_ready(args, reader.instance, err)
            next_progress = started + PROGRESS_INTERVAL
            progress = args.progress or err.isatty()  # asked once: not free, each read

            def rebuild() -> bool:
                nonlocal next_progress
                found = pipeline.step()
                now = time.monotonic()
                if progress and now >= next_progress:
                    err.write(_summary(reader, join_stage, output, started, "") + "\n")
                    err.flush()
                    next_progress = now + PROGRESS_INTERVAL
                if health is not None and health.due(now):
                    health.report(reader, join_stage, output, now)
                return found

            deadline = started + args.duration if args.duration else None
            try:
                interval = POLL_INTERVAL
                if health is not None:  # its reports come from the loop: on time
                    interval = min(interval, health.interval)
                stop_reason = run_until_stopped(rebuild, deadline, stop, reader.wait, interval)
                output.stop_by(time.monotonic() + args.stop_timeout)
                pipeline.step(last=True, deadline=output.deadline)
            except WorkerError as error:  # what was rebuilt is written, then the error
                failed = error
            pipeline.flush()
            if health is not None:  # once at stop: the last counts, what was queued delivered
                output.wait_idle(output.deadline or time.monotonic())
                health.report(reader, join_stage, output, time.monotonic())
                health.finish(max(output.deadline or 0.0, time.monotonic() + HEALTH_FILE_WAIT))
    finally:
        pipeline.close(output.deadline)
        if kernel is not None:
            kernel.events.close()
        reader.close()
        output.close()
        _close_spool(destination, output)
    if reader.cleanup_error:
        err.write(f"otel-userevents: {printable(reader.cleanup_error)}\n")
    if health is not None and health.error:
        err.write(f"otel-userevents: {printable(health.error)}\n")
    # every item handed to the output in one bucket, the line before the summary (which
    # stays the last line)
    err.write(f"otel-userevents: {printable(output.ledger().line())}\n")
    core = core_part(pipeline.decode)
    err.write(_summary(reader, join_stage, output, started, stop_reason, core) + "\n")
    if failed is not None:
        err.write(f"otel-userevents: {printable(str(failed))}\n")
    err.flush()
    return 1 if failed is not None else 0


def _close_spool(destination: Output, output: OutputStage) -> None:
    """A clean exit (the output's thread ended: nothing uses the spool any more): the
    spool's locks released, this reader's namespace removed if it holds nothing. Else (an
    exporter stuck past the deadline) left to the process's exit: the kernel frees the
    locks, and the next reader takes over and removes what is left."""
    spool = getattr(destination, "spool", None)
    if isinstance(spool, Spool) and output.finished:
        spool.close()


def _health_reporter(
    args: argparse.Namespace, destination: Output, started: float
) -> HealthReporter | None:
    """With ``--health-interval``: the reader's health, sent as metric points with
    ``--exporter otlp_proto_http`` or ``otlp_proto_grpc`` (through the output stage,
    counted as its other items), and written to ``--spool``'s health file of this reader's
    own (``health-reader-<16 hex>.json``, :mod:`..outputs.health_files`) for ``status``."""
    interval = getattr(args, "health_interval", 0.0)
    send = (
        args.exporter in ("otlp_proto_http", "otlp_proto_grpc")
        and isinstance(destination, ExporterOutput)
        and destination.metrics is not None
    )
    if not interval or not (send or args.spool):
        return None
    from opentelemetry_exporter_userevents.reader.outputs.health_files import (  # noqa: PLC0415
        health_file,
    )
    from opentelemetry_exporter_userevents.reader.outputs.health_metrics import (  # noqa: PLC0415
        HealthReporter,
    )

    spool = getattr(destination, "spool", None)
    if not isinstance(spool, Spool):  # --spool without a spool: not reached (a usage error)
        return HealthReporter(interval, started, send)
    return HealthReporter(interval, started, send, args.spool, health_file(spool.name))


def _summary(
    reader: TraceReader,
    join_stage: JoinStage,
    output: OutputStage,
    started: float,
    stop: str,
    core: str = "",
) -> str:
    """The summary line (``core``: :func:`.core_part`'s, at the stop)."""
    elapsed = time.monotonic() - started
    decoded = reader.decoder.stats
    lost = f"lost {reader.lost}"
    if reader.first_loss is not None and reader.last_loss is not None:
        first, last = reader.first_loss - started, reader.last_loss - started
        lost += f" (behind its writers, seen from {first:.1f} s to {last:.1f} s)"
    left = getattr(getattr(reader, "tracefs_instance", None), "unread_in_stale", 0)
    if left:
        lost += f", {left} more left unread in a killed reader's tracefs instance (removed)"
    parts = [
        f"{decoded.records} records in {elapsed:.1f} s ({rate(decoded.records, elapsed)})",
        lost,
        *rebuilt_parts(join_stage, decoded, output),
        *output.parts(),
        *discovery_parts(reader),
    ]
    if join_stage.span_enricher is not None:
        from opentelemetry_exporter_userevents.reader.views.kernel_view import (  # noqa: PLC0415
            kernel_parts,
        )

        parts += kernel_parts(join_stage.span_enricher)
    if core:
        parts.append(core)
    head = "otel-userevents: " + ("stopped (" + stop + "): " if stop else "")
    return head + ", ".join(parts)


SHOWN_TRACEPOINTS = 4


def filter_report(reader: TraceReader) -> list[str]:
    """The tracepoints the kernel would not take ``--filter`` for: a line per reason the
    kernel gave, with their names (or, for many, their count by kind). Raises
    :class:`.UsageError` if it took the filter for none of them (nothing would be
    recorded but resources)."""
    if not reader.filter_rejected:
        return []
    by_reason: dict[str, list[str]] = {}
    for name, message in reader.filter_rejected.items():
        _, found, reason = message.partition(f" for {name}: ")
        by_reason.setdefault(reason if found else message, []).append(name)
    lines = []
    for reason, names in by_reason.items():
        said = f" ({reason})" if reason else ""
        lines.append(
            f"the kernel rejected --filter {reader.filter!r}{said} for "
            f"{_tracepoints(reader, names)}: not recording them"
        )
    taken = [kind for kind in reader.tracepoints.values() if kind != RESOURCE_KIND]
    if not taken:
        raise UsageError(f"--filter {reader.filter!r} fits no tracepoint: " + "; ".join(lines))
    return lines


def _tracepoints(reader: TraceReader, names: list[str]) -> str:
    if len(names) <= SHOWN_TRACEPOINTS:
        return ", ".join(sorted(names))
    kinds: dict[str, int] = {}
    for name in names:
        known = reader.decoder.kind_of(name)
        kind = known[0] if known is not None else "other"
        kind = "metric" if kind.startswith("metric") else kind
        kinds[kind] = kinds.get(kind, 0) + 1
    counted = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    return f"{len(names)} tracepoints ({counted})"
