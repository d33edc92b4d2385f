# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Whether the collector takes requests, for a reader with a spool.

Without it, every request during an outage spends its whole deadline in retries (10 s by
default) before it is spooled: the output then writes one request per deadline while the
apps keep writing, its queue fills, and what no longer fits is dropped, though the spool
had room. With it, a request that the collector did not take after its retries (no answer,
or a retryable one) marks the collector down: the senders spool their next requests at
once, without posting them, and the output probes the collector with the spool's oldest
request, one attempt at a time, after :data:`FIRST_PROBE` s, then twice as long each time
it is still down, up to :data:`MAX_PROBE` s. The first request it takes marks it up:
requests are posted again and the spool drains (while the output has nothing else to
write). One gate serves the spans, logs and metrics senders (one collector). A delay the
collector asked for (``Retry-After``, ``RetryInfo``: the output's :class:`.delivery.Throttle`)
holds the probes too: none before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import Throttle

FIRST_PROBE = 1.0
"""Seconds from the collector marked down to the first probe."""
MAX_PROBE = 30.0
"""Seconds between two probes, at most: the longest a collector that is back waits for the
reader to notice (plus one attempt)."""


class CollectorGate:
    """Down or up, and when to probe next (thread-safe: the output's thread marks it, the
    summary's reads it)."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, throttle: Throttle | None = None
    ) -> None:
        self._clock = clock
        self._throttle = throttle
        """The collector's own delay (``Retry-After``, ``RetryInfo``): no probe before it."""
        self._lock = threading.Lock()
        self._down = False
        self._interval = FIRST_PROBE
        self._next_probe = 0.0
        self.outages = 0
        """Times the collector was marked down."""

    @property
    def down(self) -> bool:
        with self._lock:
            return self._down

    def mark_down(self) -> None:
        """The collector did not take a request it may take later (or a probe failed)."""
        with self._lock:
            if not self._down:
                self._down, self._interval = True, FIRST_PROBE
                self.outages += 1
            else:
                self._interval = min(self._interval * 2, MAX_PROBE)
            self._next_probe = self._clock() + self._interval

    def mark_up(self) -> None:
        with self._lock:
            self._down = False

    def probe_due(self) -> bool:
        """Down, and the time to probe has come."""
        if self._throttle is not None and self._throttle.left() > 0:
            return False  # the collector said when: not before
        with self._lock:
            return self._down and self._clock() >= self._next_probe
