# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents record``: read our tracepoints through a tracefs instance of its own,
rebuild spans and logs, and hand them to the output's stage, whose thread writes them
(:mod:`..outputs.output_stage`: reading never waits on a collector; or, with ``--capture``,
keep the pages; see :mod:`.capture`)."""

from __future__ import annotations

import argparse
import time
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, TextIO

from opentelemetry_exporter_userevents.reader.commands.common import (
    PROGRESS_INTERVAL,
    UsageError,
    discovery_parts,
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
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.join.rebuild import Rebuilder
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import OutputStage
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Spool
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput, Output
from opentelemetry_exporter_userevents.reader.terminal_text import printable
from opentelemetry_exporter_userevents.reader.views.process_view import ProcessViews, live_views
from opentelemetry_exporter_userevents.reader.worker_loop import Decoded
from opentelemetry_exporter_userevents.reader.workers import WorkerError, WorkerPool, chunks
from opentelemetry_exporter_userevents.record.tracepoints import RESOURCE_KIND

if TYPE_CHECKING:  # imported when chosen (--capture, --kernel, the health metrics), so that
    # a reader without them starts sooner
    from opentelemetry_exporter_userevents.reader.outputs.health_metrics import HealthReporter
    from opentelemetry_exporter_userevents.reader.views.kernel_view import KernelView

HEALTH_FILE_WAIT = 0.25
"""Seconds the stop waits for the last health file past its deadline at most (a disk that
stalls: no longer; it takes milliseconds otherwise)."""
BUSY_PAGES = 64
"""A read of at least this many pages starts the workers (``--workers`` above 1): a reader
that is never busy never starts them."""


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
    rebuilder = Rebuilder(
        resource_wait=args.resource_wait,
        process_views=views,
        span_enricher=kernel,
    )
    started = time.monotonic()
    health = _health_reporter(args, destination, started)
    parallel = _Parallel(reader, rebuilder, workers, kernel)
    stop_reason = "error"
    failed: WorkerError | None = None
    try:
        with stop_signals() as stop:
            reader.start()
            if kernel is not None:
                kernel.events.layout = reader.decoder.layout
                kernel.events.start()
                reader.on_announced = parallel.watch_announced
                err.write(f"otel-userevents: {kernel_clock_line(kernel.events)}\n")
            for line in filter_report(reader):
                err.write(f"otel-userevents: {printable(line)}\n")
            for name, reason in reader.incompatible.items():
                err.write(f"otel-userevents: not recording {printable(f'{name}: {reason}')}\n")
            if reader.announcement_error:
                err.write(f"otel-userevents: {printable(reader.announcement_error)}\n")
            say_ready(args, "recording", reader.instance, err)
            next_progress = started + PROGRESS_INTERVAL

            def rebuild() -> bool:
                nonlocal next_progress
                found = parallel.step(output)
                now = time.monotonic()
                if (args.progress or err.isatty()) and now >= next_progress:
                    err.write(_summary(reader, rebuilder, output, started, "") + "\n")
                    err.flush()
                    next_progress = now + PROGRESS_INTERVAL
                if health is not None and health.due(now):
                    health.report(reader, rebuilder, output, now)
                return found

            deadline = started + args.duration if args.duration else None
            try:
                stop_reason = run_until_stopped(rebuild, deadline, stop, reader.wait)
                output.stop_by(time.monotonic() + args.stop_timeout)
                parallel.step(output, last=True)
            except WorkerError as error:  # what was rebuilt is written, then the error
                failed = error
            output.write(rebuilder.flush())
            if health is not None:  # once at stop: the last counts, what was queued delivered
                output.wait_idle(output.deadline or time.monotonic())
                health.report(reader, rebuilder, output, time.monotonic())
                health.finish(max(output.deadline or 0.0, time.monotonic() + HEALTH_FILE_WAIT))
    finally:
        parallel.close()
        if kernel is not None:
            kernel.events.close()
        reader.close()
        output.close()
    if reader.cleanup_error:
        err.write(f"otel-userevents: {printable(reader.cleanup_error)}\n")
    if health is not None and health.error:
        err.write(f"otel-userevents: {printable(health.error)}\n")
    err.write(_summary(reader, rebuilder, output, started, stop_reason) + "\n")
    if failed is not None:
        err.write(f"otel-userevents: {printable(str(failed))}\n")
    err.flush()
    return 1 if failed is not None else 0


def _health_reporter(
    args: argparse.Namespace, destination: Output, started: float
) -> HealthReporter | None:
    """With ``--health-interval``: the reader's health, sent as metric points with
    ``--exporter otlp_proto_http`` or ``otlp_proto_grpc`` (through the output stage,
    counted as its other items), and written to ``--spool``'s ``health.json`` for ``status``."""
    interval = getattr(args, "health_interval", 0.0)
    send = (
        args.exporter in ("otlp_proto_http", "otlp_proto_grpc")
        and isinstance(destination, ExporterOutput)
        and destination.metrics is not None
    )
    if not interval or not (send or args.spool):
        return None
    from opentelemetry_exporter_userevents.reader.outputs.health_metrics import (  # noqa: PLC0415
        HealthReporter,
    )

    return HealthReporter(interval, started, send, args.spool)


class _Parallel:
    """Reads, and the records they hold to the rebuilder: in-process (``reader.read()``,
    as with ``--workers 1``) until a read is busy, then through workers.

    With workers, a read's pages (read, then the rescan, as ``reader.read()`` does) go out
    in chunks; the read before's records come back, concatenated in the order their pages
    were read and sorted by timestamp (stable), exactly as ``reader.read()`` orders them,
    and go to the rebuilder: one read in flight, so the workers decode the next while the
    main process rebuilds and writes. Formats found by a rescan are sent after the pages
    read before it (decoded without them, as in-process). A worker that dies costs no page
    (the pool decodes its chunks here): the last step, once every record is handed on,
    raises :class:`.WorkerError` saying so."""

    def __init__(
        self,
        reader: TraceReader,
        rebuilder: Rebuilder,
        workers: int,
        kernel: KernelView | None = None,
    ) -> None:
        self.reader = reader
        self.kernel = kernel
        """With ``--kernel``: its events are read after ours and before ours are rebuilt,
        so every kernel event up to a record's time is in the timeline when it is."""
        self.rebuilder = rebuilder
        self.workers = workers
        self.pool: WorkerPool | None = None
        self.in_flight: list[int] = []

    def step(self, output: Output, last: bool = False) -> bool:
        """One read (``last``: and every record still in flight); whether it found any."""
        reader = self.reader
        if self.pool is None:
            pages_before = reader.decoder.stats.pages
            records = reader.read()
            self._read_kernel(records)
            output.write(self.rebuilder.add(records))
            read = reader.decoder.stats.pages - pages_before
            if self.workers > 1 and read >= BUSY_PAGES and not last:
                self.pool = WorkerPool(
                    self.workers,
                    reader.prefixes,
                    reader.decoder.layout,
                    reader.decoder.providers.names,
                    encode_spans=self.kernel is None,
                )
                self.pool.add_formats(text for _system, text in reader.formats())
            return read > 0
        pages = [page for _cpu, page in reader.capture()]
        pool = self.pool
        tickets = [pool.submit(chunk) for chunk in chunks(pages)]
        pool.add_formats(text for _system, text in reader.formats())
        self._deliver(output)
        self.in_flight = tickets
        if last:
            self._deliver(output)
            error = pool.error()
            if error is not None:
                raise error
        return bool(pages)

    def _deliver(self, output: Output) -> None:
        assert self.pool is not None
        records: list[Decoded] = []
        for ticket in self.in_flight:
            records += self.pool.result(ticket)
        self.in_flight = []
        records.sort(key=_TIMESTAMP if self.kernel is None else _TIMESTAMP_FIELD)
        self._read_kernel(records)
        stats, pool_stats = self.reader.decoder.stats, self.pool.stats
        for name in ("records", "pages", "corrupt_pages", "undecodable",
                     "pages_with_missed_events", "other_prefixes"):  # fmt: skip
            setattr(stats, name, getattr(stats, name) + getattr(pool_stats, name))
            setattr(pool_stats, name, 0)
        output.write(self.rebuilder.add(records))

    def _read_kernel(self, records: list[TraceRecord] | list[Decoded]) -> None:
        """List the writers of ``records`` (a new process: every thread of it), then read
        the kernel's events so far."""
        if self.kernel is None:
            return
        events = self.kernel.events
        events.watch({record.pid for record in records})
        events.read()

    def watch_announced(self, pids: set[int]) -> None:
        """List the writers of announcements (from the thread that answers them, before
        their tracepoints are enabled), without waiting for the main loop's read."""
        if self.kernel is not None:
            self.kernel.events.watch_announced(pids)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


_TIMESTAMP = itemgetter(0)  # TraceRecord.timestamp, and a worker's record's
_TIMESTAMP_FIELD = attrgetter("timestamp")  # and a CheckedSpan's (not its first field)


def _summary(
    reader: TraceReader, rebuilder: Rebuilder, output: OutputStage, started: float, stop: str
) -> str:
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
        *rebuilt_parts(rebuilder, decoded, output),
        *output.parts(),
        *discovery_parts(reader),
    ]
    if rebuilder.span_enricher is not None:
        from opentelemetry_exporter_userevents.reader.views.kernel_view import (  # noqa: PLC0415
            kernel_parts,
        )

        parts += kernel_parts(rebuilder.span_enricher)
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
