# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""An announced prefix's tracepoints, looked up by name, never by listing every user_events
name on the machine (with thousands, a listing and a look at each name is the cost of a
rescan, paid at every announcement).

Single-format names are known exactly: ``<base>_<schema version>``, and ``<base>`` of earlier
releases. A multi-format name is ``<base>.<hex id>``, the id from a counter the kernel keeps
for all multi-format tracepoints (docs: user_events ABI), so it cannot be known, only
bounded: an announcing writer registered its tracepoints just before, so their ids follow
the highest id the last full rescan saw, or the rescan's change signal's next one if later
(:mod:`.new_tracepoint_signal`). The lookup tries :data:`MULTI_PROBE_IDS` ids from there
for each base name; what it misses (more multi-format tracepoints registered on the machine
since) fired that signal, and the next full listing finds it (:mod:`.rescan_schedule`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from opentelemetry_exporter_userevents.abi.format import split_multi_format_name
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.record.tracepoints import (
    single_format_name,
    tracepoint_kinds,
)

MULTI_PROBE_IDS = 32
"""Multi-format ids tried after the highest one the last full rescan saw, per base name:
one announced prefix costs at most ``12 * (2 + MULTI_PROBE_IDS)`` ``stat`` calls."""


def highest_multi_id(names: Iterable[str]) -> int:
    """The highest id of these ``user_events_multi`` names (-1 if none has one)."""
    highest = -1
    for name in names:
        _, format_id = split_multi_format_name(name)
        if format_id is not None and format_id > highest:
            highest = format_id
    return highest


def announced_tracepoints(
    tracefs: Tracefs, decoder: RecordDecoder, prefixes: Iterable[str], probe_from: int
) -> list[tuple[str, str, str]]:
    """(system, name, kind) of each tracepoint of ``prefixes`` that exists: single-format
    by exact name, multi-format with ids ``probe_from`` to ``probe_from + MULTI_PROBE_IDS - 1``."""
    found = []
    ids = range(max(probe_from, 0), max(probe_from, 0) + MULTI_PROBE_IDS)
    for prefix in prefixes:
        for base, (kind, schema) in tracepoint_kinds(prefix).items():
            if decoder.kind_of(base) is None:
                continue  # a prefix this reader does not read
            candidates = [(USER_EVENTS_SYSTEM, single_format_name(base, schema))]
            candidates.append((USER_EVENTS_SYSTEM, base))
            candidates += [(USER_EVENTS_MULTI_SYSTEM, f"{base}.{i:x}") for i in ids]
            for system, name in candidates:
                if os.path.isdir(tracefs.event_dir(system, name)):
                    found.append((system, name, kind))
    return found
