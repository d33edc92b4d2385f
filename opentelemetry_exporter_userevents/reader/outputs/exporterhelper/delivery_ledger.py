# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Every item handed to the output in one bucket, said in one line (issue 44):

    delivery: 1000 written = 990 delivered + 6 dropped (output: queue full (oldest
    dropped)) + 4 left in the spool

*written* is what the read loop handed to the output stage (spans, logs, metric points,
the reader's own health points among them), plus what this reader took over from the
spool namespaces of readers that exited (their records, read from the segments' headers).
The buckets: delivered (the collector took them; a ``partial_success``'s rejected records
are not written), not written (refused for good, or failed by the exporter), dropped by
stage and reason, not delivered at the stop, dropped by the spool (full, or not written),
damaged in the spool, left in the spool, and, while the reader runs, queued or in flight.
Each is counted where it happens, never derived from the others; what does not add up is
said as *unaccounted* (or, counted in two buckets, as *counted twice*), never hidden.

The counts are one snapshot: the output stage takes the spool's with its own, on the
output's thread after each write (:meth:`.OutputStage.ledger`), so a request moving from
*in flight* to *left in the spool* is in one of them, never both or neither.
"""

from __future__ import annotations

from typing import NamedTuple


class SpoolCounts(NamedTuple):
    """The spool's part (:meth:`.Spool.ledger_counts`), items (records) of any kind."""

    taken_over: int = 0
    """Records found in the namespaces of readers that exited (at start or since)."""
    dropped: int = 0
    """Dropped oldest first (the spool or the disk full), or too large for it."""
    unwritten: int = 0
    """Whose segment could not be written."""
    damaged: int = 0
    """Of segments deleted unread (a header, length or checksum that did not hold)."""
    left: int = 0
    """In the spool now."""


class StageCounts(NamedTuple):
    """The output stage's part, items of any kind."""

    written: int
    delivered: int
    failed: int
    dropped: dict[str, int]
    """By ``stage: reason``."""
    not_delivered: int
    waiting: int
    """Queued for the output or in its hands."""
    spool: SpoolCounts | None


class Ledger(NamedTuple):
    written: int
    taken_over: int
    buckets: tuple[tuple[str, int], ...]
    """(what became of them, items), delivered first; the others only when not 0."""

    @property
    def unaccounted(self) -> int:
        """Written (and taken over) less every bucket: 0 when each item is in one."""
        return self.written + self.taken_over - sum(count for _label, count in self.buckets)

    def line(self) -> str:
        """``delivery: W written = D delivered + ...``."""
        head = f"delivery: {self.written} written"
        if self.taken_over:
            head += f" + {self.taken_over} taken over from exited readers' spools"
        terms = [f"{count} {label}" for label, count in self.buckets]
        unaccounted = self.unaccounted
        text = f"{head} = " + " + ".join(terms)
        if unaccounted > 0:
            text += f" + {unaccounted} unaccounted"
        elif unaccounted < 0:
            text += f" - {-unaccounted} unaccounted (counted twice)"
        return text


def ledger(counts: StageCounts) -> Ledger:
    """The buckets of ``counts``."""
    spool = counts.spool or SpoolCounts()
    buckets: list[tuple[str, int]] = [("delivered", counts.delivered)]
    buckets.append(("not written", counts.failed))
    buckets += [(f"dropped ({reason})", n) for reason, n in sorted(counts.dropped.items())]
    buckets += [
        ("not delivered (stop timeout)", counts.not_delivered),
        ("dropped (spool full: oldest first)", spool.dropped),
        ("dropped (the spool could not be written)", spool.unwritten),
        ("damaged in the spool", spool.damaged),
        ("left in the spool", spool.left),
        ("queued or in flight", counts.waiting),
    ]
    kept = tuple(b for n, b in enumerate(buckets) if n == 0 or b[1])
    return Ledger(counts.written, spool.taken_over, kept)
