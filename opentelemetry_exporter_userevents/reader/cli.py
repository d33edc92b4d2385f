# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents``: see what is registered, and record spans and logs from tracefs.

``status`` lists our tracepoints, their format versions and who listens. ``hist`` has the
kernel count spans by name and status and logs by severity (:mod:`.hist_collector`),
reading no record. ``record``
reads them through a private tracefs instance (:mod:`.trace_reader`), rebuilds spans and
logs (:mod:`.rebuild`) and writes them to an output (:mod:`.outputs`): OTLP/JSON lines, a
tree view, or any installed OpenTelemetry exporter by its entry-point name; with
``--capture`` it keeps the pages in a trace.dat instead. ``decode`` rebuilds spans and logs
from a trace.dat or perf.data (:mod:`.capture`), as ``record`` would have.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from opentelemetry_exporter_userevents.abi.tracefs import (
    Tracefs,
    TracefsError,
    check_user_events,
    find_tracefs,
)
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM
from opentelemetry_exporter_userevents.environment_variables import (
    OTEL_EXPORTER_USER_EVENTS_PREFIX,
    OTEL_EXPORTER_USER_EVENTS_TRACEFS,
)
from opentelemetry_exporter_userevents.reader.capture import TraceDatWriter, decode_file
from opentelemetry_exporter_userevents.reader.decoder import DecoderStats, RecordDecoder
from opentelemetry_exporter_userevents.reader.hist_collector import HistCollector
from opentelemetry_exporter_userevents.reader.hist_view import render
from opentelemetry_exporter_userevents.reader.outputs import (
    ExporterOutput,
    OtlpJsonOutput,
    Output,
    TreeOutput,
)
from opentelemetry_exporter_userevents.reader.rebuild import Rebuilder
from opentelemetry_exporter_userevents.reader.trace_reader import TraceReader, our_tracepoints
from opentelemetry_exporter_userevents.record.tracepoints import (
    ANY_PREFIX,
    DEFAULT_PREFIX,
    format_version,
    parse_tracepoint,
)

POLL_INTERVAL = 0.2
PROGRESS_INTERVAL = 2.0


class _Stop(Exception):
    """SIGTERM or SIGHUP: stop recording and clean up, like Ctrl-C."""


def _raise_stop(signum: int, frame: Any) -> None:
    raise _Stop(signal.Signals(signum).name)


# --- commands ----------------------------------------------------------------------------


def _tracefs(args: argparse.Namespace) -> Tracefs:
    return find_tracefs(args.tracefs or os.environ.get(OTEL_EXPORTER_USER_EVENTS_TRACEFS))


def _prefixes(args: argparse.Namespace, every_by_default: bool = False) -> list[str]:
    """The prefixes given after the subcommand, else the global one (or, for ``status``,
    every prefix)."""
    if args.prefixes:
        return list(args.prefixes)
    if args.prefix is None:
        return [ANY_PREFIX] if every_by_default else [DEFAULT_PREFIX]
    return [args.prefix]


def status(args: argparse.Namespace, out: TextIO) -> int:
    """Our tracepoints by prefix, each with its layout, schema version and listeners."""
    tracefs = _tracefs(args)
    check_user_events(tracefs)
    try:
        users = _status_users(tracefs.status())
    except PermissionError:
        raise TracefsError(f"permission denied reading {tracefs.path}: run as root") from None
    prefixes = _prefixes(args, every_by_default=True)
    decoder = RecordDecoder(prefixes)
    instances = tracefs.instances()
    out.write(f"tracefs: {tracefs.path}\n")
    found = our_tracepoints(tracefs, decoder)
    by_prefix: dict[str, list[tuple[str, str, str]]] = {}
    for system, name, kind in found:
        parsed = parse_tracepoint(name)
        by_prefix.setdefault(parsed.prefix if parsed else "?", []).append((system, name, kind))
    for prefix in sorted(by_prefix):
        out.write(f"prefix {prefix}:\n")
        for system, name, kind in by_prefix[prefix]:
            out.write(f"  {system}/{name}: {kind}, {_describe(tracefs, system, name, decoder)}\n")
            listeners = _listeners(tracefs, system, name, users.get(name, []), instances)
            out.write(f"    listeners: {', '.join(listeners) if listeners else 'none'}\n")
    if not found:
        wanted = "any prefix" if ANY_PREFIX in prefixes else ", ".join(prefixes)
        out.write(f"no tracepoints of ours are registered ({wanted})\n")
    return 0


def _describe(tracefs: Tracefs, system: str, name: str, decoder: RecordDecoder) -> str:
    """The layout and the schema version of one tracepoint, from its format file."""
    layout = "multi-format" if system == USER_EVENTS_MULTI_SYSTEM else "single-format"
    try:
        fmt = tracefs.read_format(system, name)
    except (OSError, ValueError):
        return f"{layout}, gone"
    known = decoder.kind_of(name)
    version = format_version(fmt)
    if known is None:
        return f"{layout}, schema {version}, not ours"
    schema = known[1]
    try:
        schema.unpacker(fmt)
    except ValueError as error:
        return f"{layout}, schema {version}, not our schema ({error})"
    release = "this release's" if version == schema.version else "another release's"
    return f"{layout}, schema {version} ({release}), id {fmt.id}, {len(fmt.fields)} fields"


def _listeners(
    tracefs: Tracefs, system: str, name: str, users: list[str], instances: list[str]
) -> list[str]:
    """Who listens: perf and eBPF from user_events_status, ftrace per buffer."""
    listeners = [u for u in users if u != "ftrace"]
    for where in [None, *instances]:
        try:
            state = _read(os.path.join(tracefs.event_dir(system, name, where), "enable"))
        except OSError:
            continue
        if state.strip().startswith("1"):
            listeners.append(f"ftrace ({'instance ' + where if where else 'global'})")
    if "ftrace" in users and not any("ftrace" in x for x in listeners):
        listeners.append("ftrace")
    return listeners


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _status_users(text: str) -> dict[str, list[str]]:
    """``user_events_status`` lines: ``name # Used by ftrace perf`` -> {name: [...]}."""
    users: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, _, used = line.partition(" # Used by")
        if used:
            users[name.strip()] = used.split()
    return users


def _output(args: argparse.Namespace, out: TextIO) -> Output:
    if args.exporter:
        return ExporterOutput(args.exporter)
    if args.format == "tree":
        return TreeOutput(out)
    return OtlpJsonOutput(out)


def record(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Read until the duration ends, Ctrl-C, SIGTERM or SIGHUP; write what was rebuilt (or,
    with ``--capture``, keep the pages in a trace.dat to decode later)."""
    tracefs = _tracefs(args)
    reader = TraceReader(
        tracefs, _prefixes(args), args.filter, args.buffer_size_kb, args.rescan_interval
    )
    if args.capture:
        return _capture(args, reader, tracefs, err)
    output = _output(args, out)
    rebuilder = Rebuilder(resource_wait=args.resource_wait)
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGTERM, signal.SIGHUP)}
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
            except _Stop as signalled:
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


def _capture(args: argparse.Namespace, reader: TraceReader, tracefs: Tracefs, err: TextIO) -> int:
    """``record --capture FILE``: pages and format files to a trace.dat, no decoding (so
    a burst is kept whole however slow decoding would be); ``decode`` rebuilds it later."""
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    started = time.monotonic()
    stop_reason = "duration"
    writer: TraceDatWriter | None = None
    try:
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
        deadline = started + args.duration if args.duration else None
        while True:
            try:
                pages = reader.capture()
                for cpu, page in pages:
                    writer.add_page(cpu, page)
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if not pages:
                    time.sleep(POLL_INTERVAL)
            except KeyboardInterrupt:
                stop_reason = "interrupted"
                break
            except _Stop as signalled:
                stop_reason = str(signalled)
                break
        for cpu, page in reader.read_cpu_pages():
            writer.add_page(cpu, page)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
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
    decoded = decode_file(args.file, _prefixes(args, every_by_default=True))
    for name, reason in decoded.incompatible.items():
        err.write(f"otel-userevents: not decoding {name}: {reason}\n")
    for note in decoded.notes:
        err.write(f"otel-userevents: {note}\n")
    output = _output(args, out)
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
        *_rebuilt(rebuilder, stats, output),
    ]
    err.write(head + ", ".join(parts) + "\n")
    if not decoded.tracepoints:
        err.write("otel-userevents: the file holds no tracepoints of ours (see --prefix)\n")
    return 0


def hist(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Count until the duration ends, Ctrl-C, SIGTERM or SIGHUP; print the histograms."""
    collector = HistCollector(_tracefs(args), _prefixes(args), rescan_interval=args.rescan_interval)
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGTERM, signal.SIGHUP)}
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
        except _Stop as signalled:
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
        *_rebuilt(rebuilder, decoded, output),
    ]
    head = "otel-userevents: " + ("stopped (" + stop + "): " if stop else "")
    return head + ", ".join(parts)


def _rebuilt(rebuilder: Rebuilder, decoded: DecoderStats, output: Output) -> list[str]:
    """What was rebuilt, from whom, and every count of what was not."""
    rebuilt = rebuilder.stats
    parts = [
        f"{rebuilt.spans} spans and {rebuilt.logs} logs rebuilt",
        f"{rebuilt.resources} resources",
    ]
    if rebuilt.services:
        services = sorted(rebuilt.services.items(), key=lambda item: (-item[1], item[0]))
        parts.append("from " + ", ".join(f"{name} ({count})" for name, count in services))
    for label, count in (
        ("metric points rebuilt", rebuilt.metric_points),
        ("without resource", rebuilt.without_resource),
        ("truncated by the writer", rebuilt.truncated),
        ("invalid", rebuilt.invalid),
        ("undecodable", decoded.undecodable),
        ("corrupt pages", decoded.corrupt_pages),
        ("waiting for a resource", rebuilder.pending),
        ("not written (the output refused them)", output.failed),
    ):
        if count:
            parts.append(f"{count} {label}")
    return parts


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="otel-userevents",
        description="Read OpenTelemetry spans and logs written as Linux user_events.",
    )
    top.add_argument("--tracefs", help="tracefs mount point (default: found in /proc/mounts)")
    top.add_argument(
        "--prefix",
        default=os.environ.get(OTEL_EXPORTER_USER_EVENTS_PREFIX),
        help="tracepoint name prefix the exporters use (default: $OTEL_EXPORTER_USER_EVENTS_PREFIX"
        " or otel; status: every prefix)",
    )
    commands = top.add_subparsers(dest="command", required=True)
    stat = commands.add_parser("status", help="registered tracepoints, versions and listeners")
    rec = commands.add_parser("record", help="record spans and logs")
    hst = commands.add_parser(
        "hist", help="kernel-side counts of spans by name and status, logs by severity"
    )
    for sub in (stat, rec, hst):
        sub.add_argument(
            "--prefix",
            dest="prefixes",
            action="append",
            help="a service's tracepoint prefix; give it once per service, or '*' for every "
            "prefix whose tracepoints match our schemas (those appear within a rescan)",
        )
    rec.add_argument("--duration", type=float, help="seconds to record (default: until Ctrl-C)")
    rec.add_argument(
        "--filter",
        help="kernel event filter for span and log tracepoints, e.g. 'status_code == 2' or "
        "'duration_ns > 1000000'; tracepoints without those fields are not recorded",
    )
    rec.add_argument(
        "--capture",
        metavar="FILE",
        help="keep the raw pages and format files in FILE (trace.dat v6, which trace-cmd "
        "report reads too) instead of decoding; rebuild later with 'decode FILE'",
    )
    rec.add_argument("--buffer-size-kb", type=int, help="per-CPU ring buffer size (KiB)")
    rec.add_argument(
        "--progress", action="store_true", help="a progress line every 2 s (always on a terminal)"
    )
    dec = commands.add_parser(
        "decode", help="rebuild spans and logs from a trace.dat (trace-cmd) or perf.data"
    )
    dec.add_argument("file", help="trace.dat (trace-cmd, versions 6 and 7) or perf.data")
    dec.add_argument(
        "--prefix", dest="prefixes", action="append", help="only these prefixes (default: all)"
    )
    for sub in (rec, dec):
        sub.add_argument("--output", "-o", help="write here instead of stdout")
        sub.add_argument("--format", choices=("otlp-json", "tree"), default="otlp-json")
        sub.add_argument(
            "--exporter", help="re-export through this OpenTelemetry exporter, e.g. otlp, console"
        )
    rec.add_argument("--rescan-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    rec.add_argument("--resource-wait", type=float, default=11.0, help=argparse.SUPPRESS)
    rec.add_argument("--ready-file", help=argparse.SUPPRESS)
    hst.add_argument("--duration", type=float, help="seconds to count (default: until Ctrl-C)")
    hst.add_argument("--rescan-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    hst.add_argument("--ready-file", help=argparse.SUPPRESS)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "status":
            return status(args, sys.stdout)
        if args.command == "hist":
            return hist(args, sys.stdout, sys.stderr)
        command = decode if args.command == "decode" else record
        if args.output:
            with open(args.output, "w", encoding="utf-8") as out:
                return command(args, out, sys.stderr)
        return command(args, sys.stdout, sys.stderr)
    except (TracefsError, ValueError, ImportError, OSError) as error:
        sys.stderr.write(f"otel-userevents: {error}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
