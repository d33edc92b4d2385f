# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Which of the names tracefs lists are our tracepoints (for the live reader's scans, the
hist collector and ``status``): every version of a name the decoder knows, in both layouts,
and the EventHeader tracepoints of the providers it reads."""

from __future__ import annotations

from collections.abc import Collection

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.live.eventheader_providers import (
    eventheader_tracepoints,
)
from opentelemetry_exporter_userevents.record.tracepoints import parse_tracepoint


def our_tracepoints(
    tracefs: Tracefs,
    decoder: RecordDecoder,
    only: Collection[str] | None = None,
    listing: dict[str, list[str]] | None = None,
) -> list[tuple[str, str, str]]:
    """(system, name, kind) of each tracepoint with one of the decoder's names: every
    ``<name>.<id>`` version in ``user_events_multi``, and the single-format fallback; and
    the EventHeader tracepoints of the decoder's providers. ``only``: of these prefixes
    only (the ones just announced); ``listing``: the names of each system, if the caller
    listed them already."""
    found = []
    for system in (USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM):
        names = listing[system] if listing is not None else tracefs.events(system)
        if system == USER_EVENTS_SYSTEM and only is None:
            found += eventheader_tracepoints(names, decoder.providers)
        for name in names:
            if system == USER_EVENTS_MULTI_SYSTEM and "." not in name:
                continue
            known = decoder.kind_of(name)
            if known is None:
                continue
            if only is not None:
                parsed = parse_tracepoint(name)
                if parsed is None or parsed.prefix not in only:
                    continue
            found.append((system, name, known[0]))
    return found
