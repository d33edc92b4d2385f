# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents``: the command line; each subcommand is a module of :mod:`.commands`.

``status`` lists our tracepoints, their format versions and who listens. ``record`` reads
them through a private tracefs instance (:mod:`.trace_reader`), rebuilds spans and logs
(:mod:`.join_stage`) and writes them to an output (:mod:`.outputs`): OTLP/JSON lines, a tree
view, or any installed OpenTelemetry exporter by its entry-point name; with ``--capture`` it
keeps the pages in a trace.dat instead. ``decode`` rebuilds spans and logs from a trace.dat
or perf.data (:mod:`.capture`), as ``record`` would have. ``hist`` has the kernel count spans
by name and status and logs by severity (:mod:`.hist_collector`), reading no record.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from opentelemetry_exporter_userevents.environment_variables import (
    OTEL_EXPORTER_USER_EVENTS_PREFIX,
)
from opentelemetry_exporter_userevents.reader import options
from opentelemetry_exporter_userevents.reader.delivery_flags import add_delivery_flags
from opentelemetry_exporter_userevents.reader.pipeline.worker_count import (
    MAX_DEFAULT_WORKERS,
    default_workers,
)
from opentelemetry_exporter_userevents.reader.private_file import open_private
from opentelemetry_exporter_userevents.reader.stop_early import (
    StoppedEarly,
    honour_stop_signals,
    restore,
    said,
)
from opentelemetry_exporter_userevents.reader.terminal_text import escape_logging, printable
from opentelemetry_exporter_userevents.version import __version__

# Nothing heavier above: the entry point (:mod:`.entry_point`) sets the signal handlers
# first, then this module loads; the command's modules are imported once the options are
# checked (half a second on a host, tens of seconds in an emulated guest).

EXIT_CODES = """\
exit codes:
  0    done (record and hist also when stopped by --duration, Ctrl-C, SIGTERM or SIGHUP)
  1    runtime error (no tracefs, no rights, an output that cannot be opened, a bad file)
  2    usage error (a bad option or value, a --filter no tracepoint takes)
  130  interrupted (Ctrl-C before record or hist listens, a second Ctrl-C, or Ctrl-C
       while status or decode runs)
  143  stopped by SIGTERM before record or hist listens, or while status or decode runs
       (129: SIGHUP)"""

STANDARD_OUTPUT = ("-", "/dev/stdout")
"""``--output`` values that mean standard output (the reader's own, never reopened: a
symbolic link is not written through, :mod:`.private_file`)."""

READY_FILE_HELP = (
    "once it listens (the line 'otel-userevents: recording ...', the same in every mode, is "
    "on stderr by then), "
    "write its tracefs instance's name to FILE (created 0600), for scripts that wait "
    "before they start their apps (default: none)"
)


def _add_kernel_wait_threshold(parser: argparse.ArgumentParser) -> None:
    """``--kernel-wait-threshold``, the same for ``record`` and ``decode``."""
    parser.add_argument(
        "--kernel-wait-threshold",
        type=options.milliseconds,
        default=1.0,
        metavar="MS",
        help="with --kernel, a span event for each stretch off the CPU of at least MS "
        f"({options.MILLISECONDS}; default 1)",
    )


class _CommandLine(argparse.ArgumentParser):
    """The top parser: an option its command does not take is refused with that command's
    usage (argparse's own error shows the top-level one), and options that need another
    are refused here, before anything starts (exit 2, as for any usage error)."""

    commands: dict[str, argparse.ArgumentParser]

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: None = None
    ) -> argparse.Namespace:
        argv = list(sys.argv[1:] if args is None else args)
        parsed, extras = self.parse_known_args(argv)
        command = getattr(parsed, "command", None)
        sub = self.commands.get(command) if command else None
        if extras:
            message = "unrecognized arguments: " + " ".join(extras)
            after = argv[argv.index(command) + 1 :] if command in argv else []
            if sub is not None and all(extra in after for extra in extras):
                sub.error(message)
            self.error(message)
        if sub is not None and command == "record":
            if parsed.spool is not None and not parsed.exporter:
                sub.error("--spool keeps OTLP/HTTP requests: use it with --exporter")
        return parsed


class _Version(argparse._VersionAction):
    """``--version``: the version, and the decode stage's core (native, or why Python)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kw: Any) -> None:
        from opentelemetry_exporter_userevents.reader.native.native_core import (  # noqa: PLC0415 - start-up: only --version loads it
            load_core,
        )

        try:
            reason = load_core().reason
        except (ImportError, ValueError) as error:
            reason = str(error)
        print(f"{parser.prog} {__version__} (reader core: {reason})")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    top = _CommandLine(
        prog="otel-userevents",
        description="Read OpenTelemetry spans and logs written as Linux user_events.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action=_Version, version=__version__)
    top.add_argument("--tracefs", help="tracefs mount point (default: found in /proc/mounts)")
    top.add_argument(
        "--prefix",
        type=options.prefix,
        default=os.environ.get(OTEL_EXPORTER_USER_EVENTS_PREFIX),
        help="tracepoint name prefix the exporters use (default: $OTEL_EXPORTER_USER_EVENTS_PREFIX"
        " or otel; status: every prefix)",
    )
    commands = top.add_subparsers(dest="command", required=True)
    stat = commands.add_parser("status", help="registered tracepoints, versions and listeners")
    rec = commands.add_parser("record", help="record spans and logs", formatter_class=options.Help)
    hst = commands.add_parser(
        "hist", help="kernel-side counts of spans by name and status, logs by severity"
    )
    for sub in (stat, rec, hst):
        sub.add_argument(
            "--prefix",
            dest="prefixes",
            action="append",
            type=options.prefix,
            help="a service's tracepoint prefix; give it once per service, or '*' for every "
            "prefix whose tracepoints match our schemas (those appear within a rescan) "
            "(default: the --prefix before the command; status: every prefix)",
        )
    stat.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="each tracepoint on its lines, with its layout, schema version, id and "
        "listeners (default: a line per prefix or provider)",
    )
    stat.add_argument(
        "--spool",
        metavar="DIR",
        help="also show the health a 'record --spool DIR' reader last wrote there (default: none)",
    )
    rec.add_argument(
        "--duration",
        type=options.duration,
        help=f"how long to record: {options.MORE_THAN_ZERO} (default: until Ctrl-C)",
    )
    rec.add_argument(
        "--filter",
        help="kernel event filter for span and log tracepoints, e.g. 'status_code == 2' or "
        "'duration_ns > 1000000'; tracepoints without those fields are not recorded, and "
        "a filter no tracepoint takes is an error (default: none)",
    )
    rec.add_argument(
        "--capture",
        metavar="FILE",
        help="keep the raw pages and format files in FILE (trace.dat v6, which trace-cmd "
        "report reads too) instead of decoding; rebuild later with 'decode FILE' "
        "(default: decode as it reads)",
    )
    rec.add_argument(
        "--buffer-size-kb",
        type=options.positive,
        metavar="KIB",
        help=f"per-CPU ring buffer size in KiB: {options.AT_LEAST_ONE} (default: the kernel's)",
    )
    rec.add_argument(
        "--progress",
        action="store_true",
        help="a progress line every 2 s (default: only on a terminal)",
    )
    rec.add_argument(
        "--no-resource-detection",
        action="store_true",
        help="do not add container.id, host.name and the host's process.pid (process.vpid) "
        "from /proc to each record's resource (added by default, from the kernel's pid of "
        "each record's writer, where the resource lacks them)",
    )
    rec.add_argument(
        "--kernel",
        type=options.kernel_groups,
        metavar="GROUPS",
        help="also read the kernel's own events for the processes that write our records "
        "and add to each span what its thread did while it ran: 'sched' (on-CPU and "
        "off-CPU time by why, context switches, waits) and 'syscalls' (count and time by "
        "name), e.g. --kernel sched,syscalls (with --capture, kept in the file for decode "
        "--kernel; in the host's pid namespace only; default: none)",
    )
    _add_kernel_wait_threshold(rec)
    rec.add_argument(
        "--kernel-budget",
        type=options.positive,
        default=100_000,
        metavar="EVENTS",
        help="with --kernel, the kernel events of one process kept at once and per second; "
        "past it they are counted, the process is left out of the kernel's events for a "
        f"second, and its spans meanwhile are partial ({options.AT_LEAST_ONE}; default 100000)",
    )
    dec = commands.add_parser(
        "decode",
        help="rebuild spans and logs from a trace.dat (trace-cmd) or perf.data",
        formatter_class=options.Help,
        description="Rebuild spans and logs from a trace.dat (trace-cmd) or perf.data, as "
        "record would have written them, except that no container.id, host.name or host "
        "process.pid is added from /proc: a capture's pids are those of another time, or "
        "another machine.",
    )
    dec.add_argument("file", help="trace.dat (trace-cmd, versions 6 and 7) or perf.data")
    dec.add_argument(
        "--kernel",
        type=options.kernel_groups,
        metavar="GROUPS",
        help="add to each span what its thread did in the kernel, as record --kernel does, "
        "from the scheduler's and syscalls' events the capture holds (trace-cmd record -C tai "
        "-e sched -e syscalls, perf record -k mono -e sched:sched_switch ... -e 'syscalls:*' "
        "--exclude-perf; README has the lines), e.g. --kernel sched,syscalls (default: none)",
    )
    _add_kernel_wait_threshold(dec)
    dec.add_argument(
        "--prefix",
        dest="prefixes",
        action="append",
        type=options.prefix,
        help="only these prefixes (default: all)",
    )
    dec.add_argument(
        "--provider",
        dest="providers",
        action="append",
        type=options.provider,
        help="only these EventHeader providers (the Rust, C++ and .NET exporters'), or "
        "'otlp_metrics' for their metric exporters' tracepoint (default: all)",
    )
    rec.add_argument(
        "--provider",
        dest="providers",
        action="append",
        type=options.provider,
        help="also record the EventHeader events (the Rust, C++ and .NET OpenTelemetry "
        "exporters': Common Schema spans and logs, and any other event as a log) of this "
        "provider, from its tracepoints NAME_L1K1 to NAME_L5K1 held from the start, and "
        "any other of its tracepoints within a rescan; give it once per provider, or '*' "
        "for every EventHeader tracepoint found by rescans and the metric exporters' "
        "otlp_metrics tracepoint (OTLP metrics), held from the start; 'otlp_metrics' "
        "takes that tracepoint alone (default: none)",
    )
    for sub in (rec, dec):
        sub.add_argument(
            "--output", "-o", help="write here; '-' is standard output (default: stdout)"
        )
        sub.add_argument(
            "--format",
            choices=("otlp-json", "tree"),
            default="otlp-json",
            help="otlp-json: OTLP/JSON lines, an export request a line; tree: spans as "
            "trace trees and logs as lines, to read (default: %(default)s)",
        )
        sub.add_argument(
            "--exporter",
            type=options.exporter,
            help="re-export through this installed OpenTelemetry exporter (an entry-point "
            f"name; installed: {options.INSTALLED}) instead of --format (default: none)",
        )
        sub.add_argument(
            "--workers",
            type=options.positive,
            default=None,
            metavar="N",
            help="processes that decode, check and encode OTLP/JSON lines in parallel "
            "(default: 1 with the native core, which decodes faster in this process than "
            "workers can be handed pages; with the Python core, the CPUs available, at most "
            f"{MAX_DEFAULT_WORKERS}: here {default_workers()}; {options.AT_LEAST_ONE}); "
            "1 decodes in-process. The output is "
            "the same either way "
            "(lines may be batched differently). Started only when busy: record, at a read "
            "of 64 pages or more; decode, for a trace.dat of 4 MiB or more (a perf.data "
            "decodes in-process). The tree view and --exporter decode in-process",
        )
    rec.add_argument(
        "--stop-timeout",
        type=options.seconds,
        default=10.0,
        metavar="SECONDS",
        help="on stop (Ctrl-C, SIGTERM, SIGHUP, --duration), deliver what is queued for the "
        f"output for at most SECONDS ({options.ZERO_OR_MORE}; default 10, within systemd's "
        "30-s stop timeout), then count what was not delivered and exit, even if the output "
        "is stuck",
    )
    add_delivery_flags(rec)
    rec.add_argument(
        "--spool",
        metavar="DIR",
        help="with --exporter otlp_proto_http or otlp_proto_grpc: keep the requests the "
        "collector did not take (no answer, or 429/502/503/504, gRPC UNAVAILABLE and the "
        "other retryable codes, after the retries) in DIR (created 0700, files "
        "0600), re-send them oldest first when it takes requests again, and resume them at "
        "the next start with the same DIR. Delivery is at least once (default: none: "
        "what the collector does not take is counted and dropped)",
    )
    rec.add_argument(
        "--spool-max-mb",
        type=options.positive,
        default=256,
        metavar="MB",
        help=f"bytes the spool holds at most, in MiB ({options.AT_LEAST_ONE}; default 256); "
        "past it the oldest requests are dropped, counted in the summary",
    )
    rec.add_argument(
        "--health-interval",
        type=options.seconds,
        default=60.0,
        metavar="SECONDS",
        help="with --exporter otlp_proto_http or otlp_proto_grpc: every SECONDS, and once at "
        "stop, send the "
        "reader's own health (records read, lost, invalid, dropped, queued, spooled, "
        "exported and failed, each request's duration) as OTLP metrics through the same "
        "output (service.name otel-userevents); with --spool, also write it to "
        "DIR/health-reader-<id>.json, each reader's own, for 'status --spool DIR' "
        f"({options.ZERO_OR_MORE}; default 60; 0: never)",
    )
    rec.add_argument("--rescan-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    rec.add_argument("--resource-wait", type=float, default=11.0, help=argparse.SUPPRESS)
    rec.add_argument("--ready-file", metavar="FILE", help=READY_FILE_HELP)
    hst.add_argument(
        "--duration",
        type=options.duration,
        help=f"how long to count: {options.MORE_THAN_ZERO} (default: until Ctrl-C)",
    )
    hst.add_argument("--rescan-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    hst.add_argument("--ready-file", metavar="FILE", help=READY_FILE_HELP)
    top.commands = {"status": stat, "record": rec, "hist": hst, "decode": dec}
    return top


def main(argv: Sequence[str] | None = None) -> int:
    replaced = honour_stop_signals()  # none, when started by the entry point
    try:
        args = parser().parse_args(argv)
        escape_logging()  # the libraries log texts of records: never raw to a terminal
        return _run(args)
    except (KeyboardInterrupt, StoppedEarly) as stopped:
        return said(stopped)
    finally:
        restore(replaced)


def _run(args: argparse.Namespace) -> int:
    """The command, its modules imported now (only its own: ``status`` reads no pages)."""
    from opentelemetry_exporter_userevents.abi.tracefs import TracefsError  # noqa: PLC0415
    from opentelemetry_exporter_userevents.reader.commands.common import (  # noqa: PLC0415
        UsageError,
    )

    try:
        if args.command == "status":
            from opentelemetry_exporter_userevents.reader.commands.status import (  # noqa: PLC0415
                status,
            )

            return status(args, sys.stdout)
        if args.command == "hist":
            from opentelemetry_exporter_userevents.reader.commands.hist import hist  # noqa: PLC0415

            return hist(args, sys.stdout, sys.stderr)
        if args.command == "decode":
            from opentelemetry_exporter_userevents.reader.commands.capture import (  # noqa: PLC0415
                decode as command,
            )
        else:
            from opentelemetry_exporter_userevents.reader.commands.record import (  # noqa: PLC0415
                record as command,
            )
        if args.output and args.output not in STANDARD_OUTPUT:
            with open_private(args.output) as out:
                return command(args, out, sys.stderr)
        return command(args, sys.stdout, sys.stderr)
    except UsageError as error:
        sys.stderr.write(f"otel-userevents: {printable(str(error))}\n")
        return 2
    except (TracefsError, ValueError, ImportError, OSError) as error:
        sys.stderr.write(f"otel-userevents: {printable(str(error))}\n")  # may quote a file
        return 1


if __name__ == "__main__":
    sys.exit(main())
