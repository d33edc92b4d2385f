# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents``: the command line; each subcommand is a module of :mod:`.commands`.

``status`` lists our tracepoints, their format versions and who listens. ``record`` reads
them through a private tracefs instance (:mod:`.trace_reader`), rebuilds spans and logs
(:mod:`.rebuild`) and writes them to an output (:mod:`.outputs`): OTLP/JSON lines, a tree
view, or any installed OpenTelemetry exporter by its entry-point name; with ``--capture`` it
keeps the pages in a trace.dat instead. ``decode`` rebuilds spans and logs from a trace.dat
or perf.data (:mod:`.capture`), as ``record`` would have. ``hist`` has the kernel count spans
by name and status and logs by severity (:mod:`.hist_collector`), reading no record.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from collections.abc import Sequence

from opentelemetry_exporter_userevents.environment_variables import (
    OTEL_EXPORTER_USER_EVENTS_PREFIX,
)
from opentelemetry_exporter_userevents.reader.private_file import open_private
from opentelemetry_exporter_userevents.reader.terminal_text import escape_logging, printable
from opentelemetry_exporter_userevents.reader.worker_count import (
    MAX_DEFAULT_WORKERS,
    default_workers,
)
from opentelemetry_exporter_userevents.version import __version__

# Nothing heavier above: main() sets the signal handlers first, then the command's modules
# are imported (half a second on a host, tens of seconds in an emulated guest).

EXIT_CODES = """\
exit codes:
  0    done (record and hist also when stopped by --duration, Ctrl-C, SIGTERM or SIGHUP)
  1    runtime error (no tracefs, no rights, an output that cannot be opened, a bad file)
  2    usage error (a bad option or value, a --filter no tracepoint takes)
  130  interrupted (a second Ctrl-C, or Ctrl-C while status or decode runs)"""

READY_FILE_HELP = (
    "once it listens (the line 'otel-userevents: recording ...' is on stderr by then), "
    "write its tracefs instance's name to FILE (created 0600), for scripts that wait "
    "before they start their apps (default: none)"
)


SENDING_QUEUE_SIZE = 256
"""``--sending-queue-size``'s default: ``output_stage.MAX_QUEUED_BATCHES`` (the CLI imports
no stage; ``tests/reader/commands/test_delivery_flags.py`` checks they agree)."""
SENDING_QUEUE_MB = 64
"""``--sending-queue-max-mb``'s default: ``output_stage.MAX_QUEUED_BYTES`` in MiB."""
BATCH_ITEMS = 512
"""``output_stage.MAX_BATCH_ITEMS``."""
RETRY_AFTER_CAP = 300.0
"""``delivery.MAX_RETRY_AFTER``."""
RETRY_ON_FAILURE = {
    "initial_interval": 5.0,
    "max_interval": 30.0,
    "multiplier": 1.5,
    "max_elapsed_time": 300.0,
}
"""The Collector's ``retry_on_failure`` defaults: ``delivery.RetryOnFailure``'s."""


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError("at least 1")
    return number


def _seconds(text: str) -> float:
    number = float(text)
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError("seconds, 0 or more")
    return number


def _boolean(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError("true or false")
    return value == "true"


def _multiplier(text: str) -> float:
    number = float(text)
    if not 1 <= number < float("inf"):
        raise argparse.ArgumentTypeError("1 or more")
    return number


def _duration(text: str) -> float:
    number = float(text)
    if not number > 0 or math.isinf(number):
        raise argparse.ArgumentTypeError("seconds, more than 0")
    return number


def _prefix(text: str) -> str:
    from opentelemetry_exporter_userevents.record.tracepoints import (  # noqa: PLC0415
        ANY_PREFIX,
        MAX_PREFIX_LENGTH,
        is_prefix,
    )

    if text == ANY_PREFIX or is_prefix(text):
        return text
    rule = f"letters, digits and '_', not a digit first, at most {MAX_PREFIX_LENGTH} characters"
    raise argparse.ArgumentTypeError(f"{text!r}: a prefix is {rule} (or '*')")


def _provider(text: str) -> str:
    from opentelemetry_exporter_userevents.reader.commands.common import (  # noqa: PLC0415
        provider_argument,
    )

    return provider_argument(text)


def _exporters() -> list[str]:
    """The installed OpenTelemetry exporters' entry-point names, except ours (the reader
    would read its own output)."""
    from importlib.metadata import entry_points  # noqa: PLC0415

    names: set[str] = set()
    for kind in ("traces", "logs", "metrics"):
        names |= {e.name for e in entry_points(group=f"opentelemetry_{kind}_exporter")}
    return sorted(names - {"user_events"})


def _add_kernel_wait_threshold(parser: argparse.ArgumentParser) -> None:
    """``--kernel-wait-threshold``, the same for ``record`` and ``decode``."""
    parser.add_argument(
        "--kernel-wait-threshold",
        type=float,
        default=1.0,
        metavar="MS",
        help="with --kernel, a span event for each stretch off the CPU of at least MS "
        "milliseconds (default 1)",
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="otel-userevents",
        description="Read OpenTelemetry spans and logs written as Linux user_events.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    top.add_argument("--tracefs", help="tracefs mount point (default: found in /proc/mounts)")
    top.add_argument(
        "--prefix",
        type=_prefix,
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
            type=_prefix,
            help="a service's tracepoint prefix; give it once per service, or '*' for every "
            "prefix whose tracepoints match our schemas (those appear within a rescan) "
            "(default: the --prefix before the command; status: every prefix)",
        )
    stat.add_argument(
        "--spool",
        metavar="DIR",
        help="also show the health a 'record --spool DIR' reader last wrote there (default: none)",
    )
    rec.add_argument("--duration", type=_duration, help="seconds to record (default: until Ctrl-C)")
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
        type=int,
        help="per-CPU ring buffer size (KiB) (default: the kernel's)",
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
        type=_positive,
        default=100_000,
        metavar="EVENTS",
        help="with --kernel, the kernel events of one process kept at once and per second; "
        "past it they are counted, the process is left out of the kernel's events for a "
        "second, and its spans meanwhile are partial (default 100000)",
    )
    dec = commands.add_parser(
        "decode",
        help="rebuild spans and logs from a trace.dat (trace-cmd) or perf.data",
        description="Rebuild spans and logs from a trace.dat (trace-cmd) or perf.data, as "
        "record would have written them, except that no container.id, host.name or host "
        "process.pid is added from /proc: a capture's pids are those of another time, or "
        "another machine.",
    )
    dec.add_argument("file", help="trace.dat (trace-cmd, versions 6 and 7) or perf.data")
    dec.add_argument(
        "--kernel",
        metavar="GROUPS",
        help="add to each span what its thread did in the kernel, as record --kernel does, "
        "from the scheduler's and syscalls' events the capture holds (trace-cmd record -C tai "
        "-e sched -e syscalls, perf record -k mono -e sched:sched_switch ... -e 'syscalls:*'; "
        "README has the lines), e.g. --kernel sched,syscalls (default: none)",
    )
    _add_kernel_wait_threshold(dec)
    dec.add_argument(
        "--prefix",
        dest="prefixes",
        action="append",
        type=_prefix,
        help="only these prefixes (default: all)",
    )
    dec.add_argument(
        "--provider",
        dest="providers",
        action="append",
        type=_provider,
        help="only these EventHeader providers (the Rust, C++ and .NET exporters'), or "
        "'otlp_metrics' for their metric exporters' tracepoint (default: all)",
    )
    rec.add_argument(
        "--provider",
        dest="providers",
        action="append",
        type=_provider,
        help="also record the EventHeader events (the Rust, C++ and .NET OpenTelemetry "
        "exporters': Common Schema spans and logs, and any other event as a log) of this "
        "provider, from its tracepoints NAME_L1K1 to NAME_L5K1 held from the start, and "
        "any other of its tracepoints within a rescan; give it once per provider, or '*' "
        "for every EventHeader tracepoint found by rescans and the metric exporters' "
        "otlp_metrics tracepoint (OTLP metrics), held from the start; 'otlp_metrics' "
        "takes that tracepoint alone (default: none)",
    )
    exporters = ", ".join(_exporters()) or "none"
    for sub in (rec, dec):
        sub.add_argument("--output", "-o", help="write here (default: stdout)")
        sub.add_argument(
            "--format",
            choices=("otlp-json", "tree"),
            default="otlp-json",
            help="otlp-json: OTLP/JSON lines, an export request a line; tree: spans as "
            "trace trees and logs as lines, to read (default: %(default)s)",
        )
        sub.add_argument(
            "--exporter",
            help="re-export through this installed OpenTelemetry exporter (an entry-point "
            f"name; installed: {exporters}) instead of --format (default: none)",
        )
        sub.add_argument(
            "--workers",
            type=_positive,
            default=default_workers(),
            metavar="N",
            help="processes that decode, check and encode OTLP/JSON lines in parallel "
            f"(default: the CPUs available, at most {MAX_DEFAULT_WORKERS}: here "
            f"{default_workers()}); 1 decodes in-process. The output is the same either way "
            "(lines may be batched differently). Started only when busy: record, at a read "
            "of 64 pages or more; decode, for a trace.dat of 4 MiB or more (a perf.data "
            "decodes in-process). The tree view and --exporter decode in-process",
        )
    rec.add_argument(
        "--stop-timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="on stop (Ctrl-C, SIGTERM, SIGHUP, --duration), deliver what is queued for the "
        "output for at most SECONDS (default 10, within systemd's 30-s stop timeout), then "
        "count what was not delivered and exit, even if the output is stuck",
    )
    rec.add_argument(
        "--sending-queue-size",
        type=_positive,
        default=SENDING_QUEUE_SIZE,
        metavar="BATCHES",
        help="the Collector's sending_queue queue_size: batches (of at most "
        f"{BATCH_ITEMS} items) held in memory for the output while it sends or retries "
        "(default %(default)s); when full, the oldest are dropped for the new, counted",
    )
    rec.add_argument(
        "--sending-queue-max-mb",
        type=_positive,
        default=SENDING_QUEUE_MB,
        metavar="MB",
        help="the sending queue's bound in estimated MiB of the items it holds (default "
        "%(default)s); when reached, the oldest batches are dropped, counted",
    )
    rec.add_argument(
        "--retry-on-failure-enabled",
        type=_boolean,
        default=True,
        metavar="true|false",
        help="the Collector's retry_on_failure.enabled: with --exporter otlp_proto_http or "
        "otlp_proto_grpc, a request the collector did not take (no answer, 429/502/503/504, "
        "a retryable gRPC code, an attempt past OTEL_EXPORTER_OTLP_TIMEOUT) is tried again "
        "with the backoff below, a Retry-After or RetryInfo delay honoured (at most "
        f"{RETRY_AFTER_CAP:.0f} s) (default: true; false: one attempt)",
    )
    for flag, default, what in (
        ("initial-interval", RETRY_ON_FAILURE["initial_interval"], "the first backoff"),
        ("max-interval", RETRY_ON_FAILURE["max_interval"], "the longest backoff"),
        (
            "max-elapsed-time",
            RETRY_ON_FAILURE["max_elapsed_time"],
            "how long a request is retried from its first attempt, then spooled (--spool) or "
            "counted as not written; 0: for ever",
        ),
    ):
        rec.add_argument(
            f"--retry-on-failure-{flag}",
            type=_seconds,
            default=default,
            metavar="SECONDS",
            help=f"retry_on_failure.{flag.replace('-', '_')}: {what} (default %(default)g)",
        )
    rec.add_argument(
        "--retry-on-failure-multiplier",
        type=_multiplier,
        default=RETRY_ON_FAILURE["multiplier"],
        metavar="X",
        help="retry_on_failure.multiplier: each backoff this many times the one before, "
        "each randomized by +-50%% (default %(default)g)",
    )
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
        type=_positive,
        default=256,
        metavar="MB",
        help="bytes the spool holds at most, in MiB (default 256); past it the oldest "
        "requests are dropped, counted in the summary",
    )
    rec.add_argument(
        "--health-interval",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="with --exporter otlp_proto_http or otlp_proto_grpc: every SECONDS, and once at "
        "stop, send the "
        "reader's own health (records read, lost, invalid, dropped, queued, spooled, "
        "exported and failed, each request's duration) as OTLP metrics through the same "
        "output (service.name otel-userevents); with --spool, also write it to "
        "DIR/health.json for 'status --spool DIR' (default 60; 0: never)",
    )
    rec.add_argument("--rescan-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    rec.add_argument("--resource-wait", type=float, default=11.0, help=argparse.SUPPRESS)
    rec.add_argument("--ready-file", metavar="FILE", help=READY_FILE_HELP)
    hst.add_argument("--duration", type=_duration, help="seconds to count (default: until Ctrl-C)")
    hst.add_argument("--rescan-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    hst.add_argument("--ready-file", metavar="FILE", help=READY_FILE_HELP)
    return top


def honour_stop_signals() -> None:
    """Ctrl-C and SIGTERM stop ``otel-userevents`` from its first line on, before the
    commands' modules are imported and their own handlers set: SIGINT raises
    KeyboardInterrupt (exit 130, no traceback) even where it came ignored (a background job
    of ``sh``), and SIGTERM ends the process unless a handler takes it."""
    try:
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except ValueError:  # not the main thread (a test calling main): its signals are not ours
        pass


def main(argv: Sequence[str] | None = None) -> int:
    honour_stop_signals()
    try:
        args = parser().parse_args(argv)
        escape_logging()  # the libraries log texts of records: never raw to a terminal
        return _run(args)
    except KeyboardInterrupt:
        sys.stderr.write("otel-userevents: interrupted\n")
        return 130


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
        if args.output:
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
