# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The validation door, one object: a decoded record of any kind checked as its kind says
(spans, logs, metric points and resources by :class:`.RecordChecker`, EventHeader events
by :class:`.EventHeaderChecker`, ``otlp_metrics`` requests by
:class:`.OtlpMetricsChecker`), into what the join takes: checked records and resources,
and a :class:`.RejectedRecord` (reason and writer pid) for each record or point that did
not pass, exactly as a decoding worker sends them back (:mod:`..pipeline.worker_loop`).
"""

from __future__ import annotations

from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedLog,
    CheckedMetric,
    CheckedResource,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.decode.eventheader_check import EventHeaderChecker
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import EVENTHEADER_KIND
from opentelemetry_exporter_userevents.reader.decode.joinable import RejectedRecord
from opentelemetry_exporter_userevents.reader.decode.otlp_metrics import OTLP_METRICS_KIND
from opentelemetry_exporter_userevents.reader.decode.otlp_metrics_check import OtlpMetricsChecker
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord, RecordChecker

Passed = CheckedSpan | CheckedLog | CheckedMetric | CheckedResource | RejectedRecord
"""What the door lets through: a checked record or resource, or why one was refused."""


class RecordCheck:
    """Checks decoded records, in order (the checkers' caches are bounded: theirs)."""

    def __init__(self) -> None:
        self.checker = RecordChecker()
        self.eventheader = EventHeaderChecker()
        """EventHeader records' boundary: decoded, mapped, with the resource beside each."""
        self.otlp_metrics = OtlpMetricsChecker()
        """``otlp_metrics`` records' boundary: their requests' points and resources."""

    def check(self, record: TraceRecord, out: list[Passed]) -> None:
        """Append what ``record`` becomes to ``out``: one checked record or resource; an
        EventHeader event's resource, then the event; an ``otlp_metrics`` request's
        resources, a :class:`.RejectedRecord` per point dropped alone, then its points;
        or one :class:`.RejectedRecord`."""
        timestamp, kind, tracepoint, pid, values = record
        try:
            if kind == OTLP_METRICS_KIND:
                request = self.otlp_metrics.check(values, timestamp, pid, tracepoint)
                out += request.resources
                out += [RejectedRecord(timestamp, pid, reason) for reason in request.dropped]
                out += request.points
            elif kind == EVENTHEADER_KIND:
                checked, inline = self.eventheader.check(values, timestamp, pid, tracepoint)
                out.append(inline)
                out.append(checked)
            else:
                out.append(self.checker.check(record))
        except InvalidRecord as invalid:
            out.append(RejectedRecord(timestamp, pid, invalid.reason))
