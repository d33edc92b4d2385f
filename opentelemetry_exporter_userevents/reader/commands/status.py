# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents status``: our tracepoints by prefix, EventHeader ones by provider, and
the metric exporters' ``otlp_metrics``, each with its layout, schema version and listeners."""

from __future__ import annotations

import argparse
import os
import re
import time
from collections import Counter
from typing import TextIO

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs, TracefsError, check_user_events
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM
from opentelemetry_exporter_userevents.reader.commands.common import (
    prefixes_of,
    providers_of,
    tracefs_of,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import (
    EVENTHEADER_KIND,
    eventheader_unpacker,
    provider_of,
)
from opentelemetry_exporter_userevents.reader.decode.otlp_metrics import (
    OTLP_METRICS_KIND,
    otlp_metrics_unpacker,
)
from opentelemetry_exporter_userevents.reader.hist.collector import HIST_INSTANCE_PREFIX
from opentelemetry_exporter_userevents.reader.live.our_tracepoints import our_tracepoints
from opentelemetry_exporter_userevents.reader.live.trace_reader import INSTANCE_PREFIX
from opentelemetry_exporter_userevents.reader.live.tracefs_instance import (
    LIVE,
    STALE,
    Namespace,
    judge_instances,
)
from opentelemetry_exporter_userevents.reader.outputs.health_files import (
    NAME,
    RUNNING,
    UNKNOWN,
    health_files,
    reader_state,
)
from opentelemetry_exporter_userevents.reader.outputs.health_metrics import (
    health_lines,
    read_health_file,
)
from opentelemetry_exporter_userevents.reader.terminal_text import printable
from opentelemetry_exporter_userevents.record.tracepoints import (
    ANY_PREFIX,
    format_version,
    parse_tracepoint,
)


def status(args: argparse.Namespace, out: TextIO) -> int:
    """Our tracepoints by prefix, each with its layout, schema version and listeners."""
    tracefs = tracefs_of(args)
    check_user_events(tracefs)
    try:
        users = _status_users(tracefs.status())
    except PermissionError:
        raise TracefsError(f"permission denied reading {tracefs.path}: run as root") from None
    prefixes = prefixes_of(args, every_by_default=True)
    decoder = RecordDecoder(prefixes, providers=providers_of(args, every_by_default=True))
    instances = tracefs.instances()
    _line(out, f"tracefs: {tracefs.path}")
    found = our_tracepoints(tracefs, decoder)
    by_prefix: dict[str, list[tuple[str, str, str]]] = {}
    for system, name, kind in found:
        parsed = parse_tracepoint(name)
        if kind == EVENTHEADER_KIND:
            group = f"EventHeader provider {provider_of(name)}"
        elif kind == OTLP_METRICS_KIND:
            group = "OTLP metrics (otlp_metrics)"
        else:
            group = f"prefix {parsed.prefix if parsed else '?'}"
        by_prefix.setdefault(group, []).append((system, name, kind))
    verbose = getattr(args, "verbose", False)
    for prefix in sorted(by_prefix):
        described: list[str] = []
        listened: list[list[str]] = []
        if verbose:
            _line(out, f"{prefix}:")
        for system, name, kind in by_prefix[prefix]:
            described.append(_describe(tracefs, system, name, decoder))
            listened.append(_listeners(tracefs, system, name, users.get(name, []), instances))
            if verbose:
                _line(out, f"  {system}/{name}: {kind}, {described[-1]}")
                _line(out, f"    listeners: {', '.join(listened[-1]) or 'none'}")
        if not verbose:
            _line(out, f"{prefix}: {_brief(described, listened)}")
    if not found:
        wanted = "any prefix" if ANY_PREFIX in prefixes else ", ".join(prefixes)
        _line(out, f"no tracepoints of ours are registered ({wanted})")
    _reader_instances(tracefs, out)
    if getattr(args, "spool", None):
        reader_health(args.spool, out)
    return 0


def _brief(described: list[str], listened: list[list[str]]) -> str:
    """A group of tracepoints in one line: how many, their layouts and schemas counted (ids
    and field counts left to ``--verbose``), and each listener with the tracepoints it
    listens to (one prefix has some 25 tracepoints: 50 lines)."""
    count = len(described)
    kinds = Counter(_BRIEF_DETAIL.sub("", text) for text in described)
    if len(kinds) == 1:
        what = next(iter(kinds))
    else:
        what = "; ".join(f"{n} {text}" for text, n in kinds.most_common())
    listeners = Counter(listener for names in listened for listener in names)
    heard = ", ".join(
        f"{listener} on {'all' if n == count else f'{n} of {count}'}"
        for listener, n in sorted(listeners.items())
    )
    noun = "tracepoint" if count == 1 else "tracepoints"
    return f"{count} {noun}, {what}; listeners: {heard or 'none'}"


_BRIEF_DETAIL = re.compile(r", id \d+(, \d+ fields)?$")


def reader_health(directory: str, out: TextIO) -> None:
    """The health each ``record --spool DIR`` reader last wrote in DIR (its own
    ``health-reader-<16 hex>.json``, every ``--health-interval`` and at stop; a
    ``health.json`` of the version before too), and whether that reader still runs."""
    shown = 0
    for name in health_files(directory):
        health = read_health_file(directory, name)
        if health is None:
            continue
        shown += 1
        age = max(0.0, (time.time_ns() - health.time_ns) / 1e9)
        state = reader_state(directory, name)
        if state == UNKNOWN:  # the legacy file, or no right to try the lock: the pid then
            state = RUNNING if _running(health.pid) else "gone"
        reader = NAME.match(name)
        who = f"{reader[1]}, " if reader else ""
        _line(out, f"reader health ({who}pid {health.pid}, {state}, {age:.0f} s ago):")
        for line in health_lines(health):
            _line(out, "  " + line)
    if not shown:
        _line(out, f"reader health: none in {directory}")


def _running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reader_instances(tracefs: Tracefs, out: TextIO) -> None:
    """The instances of ``record`` and ``hist`` readers, and what a reader started here
    would do with each (:mod:`..tracefs_instance`: only those made in this pid namespace
    are judged)."""
    namespace = Namespace.here()
    for prefix in (INSTANCE_PREFIX, HIST_INSTANCE_PREFIX):
        for name, verdict in judge_instances(tracefs, prefix, namespace).items():
            if verdict == LIVE:
                what = "its reader runs"
            elif verdict == STALE:
                what = "stale (its reader is gone): the next reader started here removes it"
            else:
                what = f"left alone by readers here: {verdict}"
            _line(out, f"reader instance {name}: {what}")


def _line(out: TextIO, text: str) -> None:
    """One line of the report: names, tracepoint texts and errors come from tracefs, which
    any process allowed to register user_events writes into."""
    out.write(printable(text) + "\n")


def _describe(tracefs: Tracefs, system: str, name: str, decoder: RecordDecoder) -> str:
    """The layout and the schema version of one tracepoint, from its format file."""
    layout = "multi-format" if system == USER_EVENTS_MULTI_SYSTEM else "single-format"
    try:
        fmt = tracefs.read_format(system, name)
    except (OSError, ValueError):
        return f"{layout}, gone"
    if eventheader_unpacker(fmt) is not None:
        return f"{layout}, EventHeader (the Rust, C++ and .NET exporters'), id {fmt.id}"
    if otlp_metrics_unpacker(fmt) is not None:
        return f"{layout}, OTLP protobuf (the Rust and .NET metric exporters'), id {fmt.id}"
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
