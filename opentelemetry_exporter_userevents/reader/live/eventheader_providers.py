# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader providers read live (``record --provider``): which tracepoints of
``user_events`` are theirs, and which providers appeared after the reader started.

EventHeader writers (the Rust, C++ and .NET exporters) do not announce themselves: a named
provider's usual tracepoints are held from the start (:mod:`.tracepoint_holder`), but under
``--provider '*'`` a provider is found only by a rescan, and what it wrote before that was
seen by nobody, counted by nobody. :class:`ProviderDiscovery` remembers when each such
provider was found, so the summary can name them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import (
    EVENTHEADER_KIND,
    Providers,
    provider_of,
)
from opentelemetry_exporter_userevents.reader.decode.otlp_metrics import (
    OTLP_METRICS,
    OTLP_METRICS_KIND,
)

MAX_FOUND_LATER = 1024
"""Providers first found after the start that are remembered (the rest are counted)."""


def eventheader_tracepoints(
    names: Iterable[str], providers: Providers
) -> list[tuple[str, str, str]]:
    """(system, name, kind) of the ``user_events`` tracepoints ``names`` that belong to a
    provider read, and ``otlp_metrics`` if it is read (their format is checked when they
    are enabled)."""
    if not providers:
        return []
    found = [(USER_EVENTS_SYSTEM, n, EVENTHEADER_KIND) for n in names if providers.takes(n)]
    if providers.metrics and OTLP_METRICS in names:
        found.append((USER_EVENTS_SYSTEM, OTLP_METRICS, OTLP_METRICS_KIND))
    return found


@dataclass
class LateProvider:
    """A provider whose first records a reader may have missed."""

    provider: str
    found: float
    """Seconds after the start when a rescan first enabled one of its tracepoints."""


class ProviderDiscovery:
    """When each provider was first found: at the start, or later (bounded)."""

    def __init__(self, held: Iterable[str]) -> None:
        self._held = frozenset(held)
        """Providers named (``--provider NAME``): their usual tracepoints are held from the
        start, so they are never late."""
        self._at_start: set[str] | None = None
        self._found_later: dict[str, float] = {}
        self.not_remembered = 0

    def note(self, added: Iterable[str], seconds: float) -> None:
        """Tracepoints a scan enabled, ``seconds`` after the start (the first scan is the
        start's)."""
        providers = {p for name in added if (p := provider_of(name)) is not None}
        if self._at_start is None:
            self._at_start = providers
            return
        for provider in providers - self._at_start - self._held:
            if provider in self._found_later:
                continue
            if len(self._found_later) >= MAX_FOUND_LATER:
                self.not_remembered += 1
                continue
            self._found_later[provider] = seconds

    def late(self) -> list[LateProvider]:
        """Providers found by a rescan after the start, first found first."""
        return [LateProvider(p, s) for p, s in self._found_later.items()]
