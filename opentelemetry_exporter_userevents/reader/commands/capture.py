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
from opentelemetry_exporter_userevents.reader.capture import (
    CaptureError,
    TraceDatWriter,
    batches,
    decode_file,
)
from opentelemetry_exporter_userevents.reader.commands.common import (
    core_part,
    discovery_parts,
    native_of,
    output_of,
    prefixes_of,
    providers_of,
    rebuilt_parts,
    run_until_stopped,
    say_ready,
    stop_signals,
    workers_of,
)
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from opentelemetry_exporter_userevents.reader.pipeline.decode_stage import DecodeStage
from opentelemetry_exporter_userevents.reader.pipeline.pipeline import Pipeline
from opentelemetry_exporter_userevents.reader.pipeline.worker_pool import WorkerError
from opentelemetry_exporter_userevents.reader.terminal_text import printable


def capture(args: argparse.Namespace, reader: TraceReader, tracefs: Tracefs, err: TextIO) -> int:
    """``record --capture FILE``: pages and format files to a trace.dat, no decoding (so
    a burst is kept whole however slow decoding would be); ``decode`` rebuilds it later.

    Safe on failure: whatever happens, the instance is disabled and removed first (no
    service keeps paying for a listener that is gone), then the trace.dat is written; if it
    cannot be (disk full, FILE a directory), the pages stay in their spool files, which the
    one-line error names, and the exit status is 1 (130 after a second Ctrl-C)."""
    started = time.monotonic()
    writer: TraceDatWriter | None = None
    stop_reason = "error"
    failure: BaseException | None = None
    kernel = None
    if getattr(args, "kernel", None):  # imported when chosen, as record does
        from opentelemetry_exporter_userevents.reader.commands import (  # noqa: PLC0415
            capture_kernel,
        )

        kernel = capture_kernel.KernelCapture(args, reader, tracefs)
    try:
        with stop_signals() as stop:
            reader.start()
            if kernel is not None:
                kernel.start(err)
            writer = TraceDatWriter(
                args.capture,
                reader.decoder.layout.page_size,
                tracefs.header_page(),
                tracefs.header_event(),
                kernel.clock if kernel is not None else None,
            )
            say_ready(args, reader.instance, err, f" into {args.capture}")

            def keep_pages() -> bool:
                pages = reader.capture()
                for cpu, page in pages:
                    writer.add_page(cpu, page)
                kept = kernel.keep(writer, pages) if kernel is not None else 0
                # as record: again at once only if a CPU gave more than the page being filled
                return len(pages) > len({cpu for cpu, _page in pages}) or kept > 0

            deadline = started + args.duration if args.duration else None
            stop_reason = run_until_stopped(keep_pages, deadline, stop, reader.wait)
            pages = reader.read_cpu_pages()
            for cpu, page in pages:
                writer.add_page(cpu, page)
            if kernel is not None:
                kernel.keep(writer, pages)
    except BaseException as error:  # acted on below, once the reader is closed
        failure = error
        if isinstance(error, KeyboardInterrupt) and isinstance(error.__context__, OSError):
            # One Ctrl-C that came while it was already stopping for that error (the
            # handlers were just restored): the error is why it stopped, not a second one.
            failure = error.__context__
    reader.close()
    if kernel is not None:
        kernel.close()
    if reader.cleanup_error:
        err.write(f"otel-userevents: {printable(reader.cleanup_error)}\n")
    if writer is None:
        if failure is not None:
            raise failure  # nothing captured: the reader's error, as for record
        return 0
    for system, text in reader.formats() + (kernel.formats() if kernel is not None else []):
        writer.add_format(system, text)
    cmdlines = _saved_cmdlines(tracefs)
    if failure is not None and not isinstance(failure, OSError):
        kept = writer.keep(cmdlines)  # a second Ctrl-C (quit at once), or a bug
        err.write(f"otel-userevents: capture stopped ({_why(failure)}): {kept}\n")
        err.flush()
        if isinstance(failure, KeyboardInterrupt):
            return 130
        raise failure
    try:
        writer.close(cmdlines)
    except OSError as error:  # SpoolKeptError: the pages are kept, and it says where
        stopped = f"capture stopped: {_why(failure)}; " if failure is not None else ""
        err.write(f"otel-userevents: {stopped}{error}\n")
        err.flush()
        return 1
    kept_pages = writer.pages
    summary = (
        f"{kept_pages} pages ({kept_pages * reader.decoder.layout.page_size / 1048576:.1f} MiB)"
        f" of {len(reader.tracepoints)} tracepoints captured to {args.capture} "
        f"(trace.dat v6), lost {reader.lost}; rebuild with: otel-userevents decode "
        f"{args.capture}"
    )
    summary = ", ".join([summary, *(kernel.parts() if kernel else []), *discovery_parts(reader)])
    if failure is not None:  # reading or spooling failed; what was kept is in the file
        err.write(f"otel-userevents: capture stopped: {_why(failure)}; {summary}\n")
        return 1
    err.write(f"otel-userevents: stopped ({stop_reason}): {summary}\n")
    return 0


def _saved_cmdlines(tracefs: Tracefs) -> str:
    try:
        return tracefs.saved_cmdlines()
    except OSError:
        return ""  # only names the writers' pids


def _why(failure: BaseException) -> str:
    if isinstance(failure, KeyboardInterrupt):
        return "interrupted twice"
    if isinstance(failure, OSError) and failure.strerror:
        return f"{failure.filename}: {failure.strerror}" if failure.filename else failure.strerror
    return str(failure) or type(failure).__name__


def decode(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Rebuild what a trace.dat or perf.data holds, as ``record`` would have written it."""
    started = time.monotonic()
    providers = providers_of(args, every_by_default=True)
    decoded = decode_file(args.file, prefixes_of(args, every_by_default=True), providers)
    for name, reason in decoded.incompatible.items():
        err.write(f"otel-userevents: not decoding {printable(f'{name}: {reason}')}\n")
    kernel_run = None
    if getattr(args, "kernel", None):  # imported when chosen, as record does
        from opentelemetry_exporter_userevents.reader.commands import (  # noqa: PLC0415
            capture_kernel,
        )

        kernel_run = capture_kernel.kernel_view_of(args, decoded, err)
    # decode --kernel decodes in-process: its source interleaves the kernel's events with
    # ours (README, "decode --kernel")
    workers = 1 if kernel_run is not None else workers_of(args)
    output = output_of(args, out, workers)
    decode_stage = DecodeStage(
        decoded.decoder, workers, native=native_of(output, kernel_run is not None)
    )
    # the whole file is there: no waiting
    join_stage = JoinStage(
        resource_wait=float("inf"),
        span_enricher=kernel_run.view if kernel_run is not None else None,
    )
    pipeline = Pipeline(decode_stage, join_stage, output)
    damaged: CaptureError | None = None
    failed: WorkerError | None = None
    try:
        try:  # records decode as they are taken: a batch at a time, whatever the file's size
            if kernel_run is not None:
                pipeline.run(kernel_run.batches())
            else:
                pipeline.run(batches(decode_stage.capture_records(decoded)))
        except CaptureError as error:  # a chunk that does not inflate: the rest is lost
            damaged = error
        except WorkerError as error:  # what was rebuilt is written, then the error
            failed = error
        pipeline.flush()
    finally:
        pipeline.close()
        output.close()
    for note in decoded.notes:  # complete once every record is read
        err.write(f"otel-userevents: {printable(note)}\n")
    if kernel_run is not None:
        for note in kernel_run.notes():
            err.write(f"otel-userevents: kernel view: {printable(note)}\n")
    stats = decoded.decoder.stats
    elapsed = time.monotonic() - started
    head = f"otel-userevents: {args.file} ({decoded.kind}): "
    parts = [
        f"{stats.records} records of {len(decoded.tracepoints)} tracepoints in {elapsed:.1f} s",
        f"{stats.pages_with_missed_events} pages after lost events",
        *rebuilt_parts(join_stage, stats, output),
    ]
    if kernel_run is not None:
        parts += capture_kernel.kernel_parts(kernel_run.view)
    parts.append(core_part(decode_stage))
    err.write(head + ", ".join(parts) + "\n")
    if not decoded.tracepoints:
        err.write(
            "otel-userevents: the file holds no tracepoints of ours (see --prefix) "
            "and no EventHeader ones (see --provider)\n"
        )
    if damaged is not None:  # after what was read is written and counted
        raise damaged
    if failed is not None:
        err.write(f"otel-userevents: {printable(str(failed))}\n")
        return 1
    return 0
