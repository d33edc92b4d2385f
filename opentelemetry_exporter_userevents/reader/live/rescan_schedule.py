# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""When the periodic rescan lists every user_events name: a bounded share of the time,
whatever the number of names on the machine.

A listing costs in proportion to the names (10,000 of them: 14 ms of listing in an emulated
6.12 guest, and the look at each name after it; 196 ms a rescan on the host measured in
issue 42). Every rescan interval the schedule asks the change signal
(:mod:`.new_tracepoint_signal`, O(1)) and lists only when it says a multi-format tracepoint
was made, or when :data:`QUIET_LISTING_INTERVAL` passed (single-format tracepoints, which
it does not see), or at every interval when there is no signal; and never sooner than
:data:`FULL_LISTING_SHARE` allows after the last listing's own duration. Announcing
services are looked up by name at once and never wait for a listing
(:mod:`.announced_tracepoints`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from opentelemetry_exporter_userevents.reader.live.new_tracepoint_signal import (
    NewTracepointSignal,
)

FULL_LISTING_SHARE = 0.05
"""The most of the time full listings may take: after one that took ``d`` seconds the next
starts no sooner than ``d * (1 / FULL_LISTING_SHARE - 1)`` seconds after it ended, so
listings take at most this share of a second on average (plus one listing), whatever the
number of names."""
QUIET_LISTING_INTERVAL = 10.0
"""Seconds between full listings while the signal says no multi-format tracepoint was
made: what it does not see (single-format tracepoints, EventHeader providers) is found
within this (and the share)."""


@dataclass
class RescanStats:
    checks: int = 0
    """Rescan intervals that passed (each asks the signal at most once)."""
    full_listings: int = 0
    """Listings of every user_events name."""
    signalled: int = 0
    """Checks at which the signal said a multi-format tracepoint was made (or that it
    knew no id to expect yet)."""
    listing_seconds: float = 0.0
    """Time the full listings took in all."""


class RescanSchedule:
    """Says when a full listing is due (:meth:`due`); told when one ran (:meth:`listed`)."""

    def __init__(self, interval: float, signal: NewTracepointSignal | None) -> None:
        """``signal``: None for no change signal (every interval, within the share)."""
        self.interval = interval
        self.signal = signal
        self.stats = RescanStats()
        self._next_check = 0.0
        self._earliest = 0.0
        self._last_listing: float | None = None

    def due(self, now: float) -> bool:
        """Whether to list every name now (called as often as wished; acts once per
        interval). When the share allows a listing, the signal is asked (which registers
        the probe the listing then learns)."""
        if now < self._next_check:
            return False
        self._next_check = now + self.interval
        self.stats.checks += 1
        if now < self._earliest:
            return False
        last = self._last_listing
        quiet = last is None or now - last >= QUIET_LISTING_INTERVAL
        if self.signal is None:
            return True
        changed = self.signal.changed()
        if changed and not quiet and self.signal.unavailable is None:
            self.stats.signalled += 1
        return changed or quiet

    def listed(self, started: float, ended: float, multi_format_names: Iterable[str]) -> None:
        """A full listing ran from ``started`` to ``ended`` (``time.monotonic()``) and saw
        these ``user_events_multi`` names."""
        took = max(0.0, ended - started)
        self.stats.full_listings += 1
        self.stats.listing_seconds += took
        self._last_listing = ended
        self._earliest = ended + took * (1 / FULL_LISTING_SHARE - 1)
        self._next_check = max(self._next_check, ended + self.interval)
        if self.signal is not None:
            self.signal.learn(multi_format_names)
