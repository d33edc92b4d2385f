# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the ``otel-userevents`` commands share: stopping on signals, where tracefs is, which
prefixes, which output, and the counts of what was rebuilt."""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs, find_tracefs
from opentelemetry_exporter_userevents.environment_variables import (
    OTEL_EXPORTER_USER_EVENTS_TRACEFS,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import (
    ANY_PROVIDER,
    is_provider,
)
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from opentelemetry_exporter_userevents.reader.native.native_core import (
    OTLP_PROTO,
    CoreChoice,
    NativeCore,
    load_core,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import RetryOnFailure
from opentelemetry_exporter_userevents.reader.outputs.output import (
    ExporterOutput,
    OtlpJsonOutput,
    Output,
    TreeOutput,
)
from opentelemetry_exporter_userevents.reader.pipeline.decode_stage import DecodeStage
from opentelemetry_exporter_userevents.reader.pipeline.worker_count import default_workers
from opentelemetry_exporter_userevents.reader.private_file import open_private
from opentelemetry_exporter_userevents.reader.terminal_text import printable
from opentelemetry_exporter_userevents.record.tracepoints import ANY_PREFIX, DEFAULT_PREFIX

POLL_INTERVAL = 0.2
"""The most ``record`` rests between reads (the kernel wakes it sooner when a CPU's buffer is
half full: :mod:`.read_wakeup`), and the most a stop signal waits to be seen. Not longer: the
process view looks a writer up in ``/proc`` when it reads the writer's first record, and a
one-second rest let a short-lived writer (the README's quick start) exit first."""
PROGRESS_INTERVAL = 2.0


class UsageError(ValueError):
    """An option the command cannot run with, found only once it runs (a ``--filter`` no
    tracepoint takes): the command line exits 2, as for argparse's usage errors."""


def rate(count: int, seconds: float) -> str:
    """``count`` per second, as precise as it is useful: ``0.4/s``, ``12/s``, ``45,677/s``."""
    per_second = count / seconds if seconds > 0 else 0.0
    if 0 < per_second < 9.95:
        return f"{per_second:.1f}/s"
    return f"{per_second:,.0f}/s"


class StopSignals:
    """Ctrl-C, SIGTERM and SIGHUP while a command reads, noted and acted on between two steps.

    Never raised inside a step: one interrupted after it took pages from the kernel's buffer,
    and before it handed on their records, would lose them with no count. A second Ctrl-C
    raises KeyboardInterrupt, for a step or final flush that does not return."""

    def __init__(self) -> None:
        self.reason: str | None = None
        """``interrupted`` (Ctrl-C), ``SIGTERM`` or ``SIGHUP``; None until one came."""

    def note(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and self.reason == "interrupted":
            raise KeyboardInterrupt
        if self.reason is None:
            self.reason = "interrupted" if signum == signal.SIGINT else signal.Signals(signum).name


@contextmanager
def stop_signals() -> Iterator[StopSignals]:
    """While the body runs, Ctrl-C, SIGTERM and SIGHUP are noted in the :class:`StopSignals`
    it is given; the previous handlers are back before the cleanup after it."""
    stop = StopSignals()
    signums = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, stop.note) for s in signums}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_until_stopped(
    step: Callable[[], bool],
    deadline: float | None,
    stop: StopSignals,
    idle: Callable[[float], bool | None] = time.sleep,
    interval: float = POLL_INTERVAL,
) -> str:
    """Call ``step`` until ``deadline`` (monotonic) or a signal noted in ``stop``; after a
    step that was not busy, idle up to ``interval`` seconds, by calls of ``idle(seconds)``
    of at most :data:`POLL_INTERVAL` (a signal is seen within that), sooner when ``idle``
    says there is something to read (a reader's does: a buffer at its watermark, a new
    service's announcement); return why it stopped: ``duration``, ``interrupted`` or the
    signal's name."""
    while True:
        found = step()
        if stop.reason is not None:
            return stop.reason
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return "duration"
        if found:
            continue
        until = now + interval if deadline is None else min(now + interval, deadline)
        while stop.reason is None and (left := until - time.monotonic()) > 0:
            if idle(min(left, POLL_INTERVAL)):  # resumed after a signal (PEP 475)
                break


def say_ready(args: argparse.Namespace, instance: str, err: TextIO, how: str = "") -> None:
    """Say that the reader listens, once it does: a line on stderr, as trace-cmd's "Hit
    Ctrl^C to stop recording", then, with ``--ready-file``, the tracefs instance's name in
    that file (scripts and tests wait for it; the line is out by then). The line begins
    ``otel-userevents: recording`` in every mode (``how``, after the prefixes, says what
    ``--capture`` and ``hist`` do instead of decoding): a script waits for one form."""
    prefixes = prefixes_of(args)
    who = "every prefix" if ANY_PREFIX in prefixes else "prefix " + ", ".join(prefixes)
    duration = getattr(args, "duration", None)
    until = f" for {duration:g} s" if duration else ""
    err.write(
        f"otel-userevents: recording {printable(who)}{until}{printable(how)} (tracefs "
        f"instance {printable(instance)}); Ctrl-C or SIGTERM stops it\n"
    )
    err.flush()
    ready_file = getattr(args, "ready_file", None)
    if ready_file:
        with open_private(ready_file) as f:
            f.write(instance)


def tracefs_of(args: argparse.Namespace) -> Tracefs:
    return find_tracefs(args.tracefs or os.environ.get(OTEL_EXPORTER_USER_EVENTS_TRACEFS))


def prefixes_of(args: argparse.Namespace, every_by_default: bool = False) -> list[str]:
    """The prefixes given after the subcommand, else the global one (or, for ``status``,
    every prefix)."""
    given, prefix = getattr(args, "prefixes", None), getattr(args, "prefix", None)
    if given:
        return list(given)
    if prefix is None:
        return [ANY_PREFIX] if every_by_default else [DEFAULT_PREFIX]
    return [prefix]


def providers_of(args: argparse.Namespace, every_by_default: bool = False) -> list[str]:
    """The EventHeader providers given (``--provider``), else every one (``decode``) or
    none (``record``)."""
    providers = getattr(args, "providers", None)
    if providers:
        return list(providers)
    return [ANY_PROVIDER] if every_by_default else []


def provider_argument(text: str) -> str:
    """``--provider``'s value: ``*``, or a name an EventHeader tracepoint can have."""
    if text == ANY_PROVIDER or is_provider(text):
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r}: a provider is what comes before _L<level>K<keyword> in an EventHeader "
        "tracepoint's name (letters, digits and _; or '*')"
    )


def workers_of(args: argparse.Namespace) -> int:
    """Decoding workers to use: ``--workers`` for OTLP/JSON lines (with ``--kernel`` too:
    spans come back checked, for the kernel view to add to), by default 1 where the native
    core decodes (its pages go faster through it here than to a worker) and the CPUs
    otherwise; 1 (in-process) for the tree view and ``--exporter``, which need SDK objects
    built from whole checked records (:mod:`..pipeline.worker_pool`), or whose protobuf
    the native core writes here."""
    if args.exporter or args.format == "tree":
        return 1
    if args.workers is None:  # the default: in-process where the native core decodes
        native = reader_core().core is not None and not getattr(args, "kernel", None)
        return 1 if native else default_workers()
    return max(1, int(args.workers))


def retry_on_failure_of(args: argparse.Namespace) -> RetryOnFailure | None:
    """``record``'s ``--retry-on-failure-*`` flags (the Collector's ``retry_on_failure``);
    None for a command without them (``decode``: the exporter's client's retries)."""
    if not hasattr(args, "retry_on_failure_enabled"):
        return None
    return RetryOnFailure(
        enabled=args.retry_on_failure_enabled,
        initial_interval=args.retry_on_failure_initial_interval,
        max_interval=args.retry_on_failure_max_interval,
        multiplier=args.retry_on_failure_multiplier,
        max_elapsed_time=args.retry_on_failure_max_elapsed_time,
    )


_CORE: CoreChoice | None = None


def reader_core() -> CoreChoice:
    """The decode stage's core, chosen once a process (:func:`.native_core.load_core`);
    exits with the reason if ``OTEL_EXPORTER_USER_EVENTS_READER_CORE`` asks for one that
    cannot be had."""
    global _CORE
    if _CORE is None:
        try:
            _CORE = load_core()
        except (ImportError, ValueError) as error:
            raise SystemExit(f"otel-userevents: {error}") from None
    return _CORE


def native_of(output: Output, kernel: bool = False) -> NativeCore | None:
    """The native core, for an output that takes encoded items: OTLP/JSON lines (as the
    workers'), or the direct OTLP senders' protobuf (``--exporter otlp_proto_http`` and
    ``otlp_proto_grpc``); not ``--kernel`` (its view adds to spans before they are
    encoded), nor the tree view or another exporter (they build SDK objects)."""
    if kernel:
        return None
    core = reader_core().core
    if core is None:
        return None
    if isinstance(output, OtlpJsonOutput):
        return core
    if isinstance(output, ExporterOutput) and not output.sdk_objects:
        return load_core(OTLP_PROTO).core
    return None


def core_part(stage: DecodeStage) -> str:
    """The summary's word on the core: which one decoded, and why not the native one."""
    if stage.native is not None:
        return "native core"
    choice = reader_core()
    return "Python core" + (choice.reason.removeprefix("python") if choice.core is None else "")


def output_of(args: argparse.Namespace, out: TextIO, workers: int = 1) -> Output:
    """The output (with workers, OTLP/JSON lines: they take the items workers encoded)."""
    if args.exporter:
        return ExporterOutput(args.exporter, retry=retry_on_failure_of(args))
    if args.format == "tree":
        return TreeOutput(out)
    return OtlpJsonOutput(out)


def rebuilt_parts(join_stage: JoinStage, decoded: DecoderStats, output: Output) -> list[str]:
    """What was rebuilt, from whom, and every count of what was not; texts that writers
    chose (service names) escaped for the terminal."""
    rebuilt = join_stage.stats
    parts = [
        f"{rebuilt.spans} spans and {rebuilt.logs} logs rebuilt",
        f"{rebuilt.resources} resources",
    ]
    if rebuilt.services:
        services = _largest(rebuilt.services, SHOWN_SERVICES)
        named = ", ".join(f"{printable(name)} ({count})" for name, count in services)
        others = rebuilt.other_services + sum(rebuilt.services.values())
        others -= sum(count for _, count in services)
        if others:
            named += f" and {others} records of other services"
        parts.append("from " + named)
    if rebuilt.invalid:
        parts.append(invalid_part(join_stage))
    for label, count in (
        ("metric points rebuilt", rebuilt.metric_points),
        ("without resource", rebuilt.without_resource),
        ("truncated by the writer", rebuilt.truncated),
        ("undecodable", decoded.undecodable),
        (
            "records of other prefixes or providers skipped (see --prefix, --provider)",
            decoded.other_prefixes,
        ),
        ("corrupt pages", decoded.corrupt_pages),
        ("waiting for a resource", join_stage.pending),
        ("released early: too many waiting for a resource", rebuilt.pending_evicted),
        ("resources forgotten: too many resources", rebuilt.resources_evicted),
        ("not written (the output refused them)", output.failed),
    ):
        if count:
            parts.append(f"{count} {label}")
    views = join_stage.process_views
    if views is not None:
        seen = views.stats
        if seen.gone_records:
            parts.append(
                f"{seen.gone_records} records of {seen.gone_pids} writer pids gone before "
                "the reader looked them up in /proc (no container.id, no host process.pid)"
            )
        if seen.forgotten:
            parts.append(f"{seen.forgotten} writer pids looked up again: too many writers")
    return parts


SHOWN_SERVICES = 8
SHOWN_REASONS = 4
SHOWN_PIDS = 4


def invalid_part(join_stage: JoinStage) -> str:
    """``N invalid (reason: n, ...; by writer pid P: n, ...)``: the largest counts."""
    stats = join_stage.stats
    reasons = "; ".join(
        f"{reason}: {count}" for reason, count in _largest(stats.invalid_reasons, SHOWN_REASONS)
    )
    if len(stats.invalid_reasons) > SHOWN_REASONS:
        reasons += f"; {len(stats.invalid_reasons) - SHOWN_REASONS} more reasons"
    pids = ", ".join(f"{pid}: {count}" for pid, count in _largest(stats.invalid_pids, SHOWN_PIDS))
    if len(stats.invalid_pids) > SHOWN_PIDS or stats.invalid_other_pids:
        pids += ", others"
    return f"{stats.invalid} invalid ({printable(reasons)}; by writer pid {pids})"


def discovery_parts(reader: TraceReader) -> list[str]:
    """Under ``*``: the services and EventHeader providers whose first records may be
    missing (``late``), and announcements that made no sense; nothing when all is well."""
    parts = []
    late = reader.late_services()
    if late or reader.found_later_not_remembered:
        shown = []
        for service in late[:SHOWN_SERVICES]:
            found = (
                f"listened {service.found:.1f} s in"
                if service.found is not None
                else "its tracepoints gone before it was listened to"
            )
            shown.append(f"{printable(service.prefix)} ({service.why}; {found})")
        more = len(late) - len(shown) + reader.found_later_not_remembered
        if more:
            shown.append(f"{more} more")
        parts.append(
            f"{len(late) + reader.found_later_not_remembered} services may have lost their "
            f"first records (not counted by the kernel or the app): {', '.join(shown)}"
        )
    late_providers = reader.late_providers()
    if late_providers or reader.providers.not_remembered:
        shown = [
            f"{printable(late.provider)} (found {late.found:.1f} s in)"
            for late in late_providers[:SHOWN_SERVICES]
        ]
        more = len(late_providers) - len(shown) + reader.providers.not_remembered
        if more:
            shown.append(f"{more} more")
        parts.append(
            f"{len(late_providers) + reader.providers.not_remembered} EventHeader providers "
            "may have lost their first records (they announce nothing: found by a rescan; "
            f"name them with --provider to hold their tracepoints): {', '.join(shown)}"
        )
    heard = reader.announcements
    if heard is not None:
        for label, count in (
            ("announcements that made no sense", heard.stats.invalid),
            ("announcements lost", heard.stats.lost),
            ("announced prefixes forgotten (the oldest, over 1024)", heard.stats.forgotten),
            (
                "announced prefixes not looked up at once (over 1024 in one read)",
                heard.stats.not_looked_up,
            ),
            ("'gave up' announcements from another writer", heard.stats.gave_up_not_theirs),
        ):
            if count:
                parts.append(f"{count} {label}")
    if heard is not None and reader.answers is not None:
        answers = reader.answers.stats
        for label, count in (
            ("announced prefixes deferred (over the rate)", answers.deferred),
            ("announced prefixes dropped (too many waiting)", answers.dropped),
        ):
            if count:
                parts.append(f"{count} {label}")
        if reader.answers.error:
            parts.append(printable(reader.answers.error))
    return parts


def _largest(counts: dict[Any, int], shown: int) -> list[tuple[Any, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))[:shown]
