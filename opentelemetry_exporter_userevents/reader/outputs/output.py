# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Where rebuilt spans and logs go: OTLP/JSON lines, a tree view, or an exporter.

Every output takes batches of rebuilt telemetry in order and counts in ``failed`` what it
could not write (never raising for one bad item). Spans and logs come joined
(:class:`.JoinedRecord`): OTLP/JSON writes them straight (:mod:`.otlp_json_direct`); the
tree view and an SDK exporter get them built into SDK objects here (:mod:`.sdk_objects`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeAlias

from opentelemetry_exporter_userevents.reader.decode.checked_records import CheckedLog, CheckedSpan
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord, Telemetry
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint, metrics_data
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.collector_gate import (
    CollectorGate,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import (
    RetryOnFailure,
    Throttle,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Spool
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json, otlp_json_direct
from opentelemetry_exporter_userevents.reader.outputs.exporters.grouping import EncodedCache
from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_items import sdk_spans_and_logs

DEFAULT_RETRY = RetryOnFailure()
"""The Collector's ``retry_on_failure`` defaults."""

if TYPE_CHECKING:  # the tree view, the exporters and the SDK are imported when chosen
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.trace import ReadableSpan

    from opentelemetry_exporter_userevents.reader.outputs.exporters import direct_sender


class Output(Protocol):
    failed: int
    """Items the output could not write."""

    def write(self, items: Sequence[Telemetry]) -> None: ...

    def close(self) -> None: ...


Item: TypeAlias = "Telemetry | ReadableSpan | ReadableLogRecord"
"""What an output's ``write`` takes: the join's, or spans and logs already built into SDK
objects (OTLP/JSON encodes them with the OTLP encoder: the same JSON)."""


def _split(items: Sequence[Item]) -> tuple[list[ReadableSpan], list[ReadableLogRecord]]:
    return sdk_spans_and_logs(items)


def _metric_points(items: Sequence[Item]) -> list[MetricPoint]:
    return [i for i in items if isinstance(i, MetricPoint)]


class OtlpJsonOutput:
    """One ExportTraceServiceRequest line and one ExportLogsServiceRequest line per batch.

    Spans and logs come as JoinedRecord, written straight (:mod:`.otlp_json_direct`; with
    ``--workers``, each with the item a worker encoded): no SDK object is built. Given as
    SDK objects, they go through the OTLP encoder (the same JSON)."""

    def __init__(self, out: TextIO) -> None:
        otlp_json.require()
        self.out = out
        self.failed = 0
        """Spans and logs the OTLP encoder could not carry, left out."""
        self._encoded = EncodedCache[str]()

    def write(self, items: Sequence[Item]) -> None:
        # One pass, the kind told by type where it can be (``is_span`` only for a worker's
        # record): this runs for every span and log the reader writes.
        spans_joined: list[JoinedRecord] = []
        logs_joined: list[JoinedRecord] = []
        for item in items:
            if type(item) is JoinedRecord:
                checked = item.checked
                if type(checked) is CheckedLog:
                    logs_joined.append(item)
                elif type(checked) is CheckedSpan or item.is_span:
                    spans_joined.append(item)
                else:
                    logs_joined.append(item)
        if spans_joined:
            self._write_line(otlp_json_direct.spans_line(spans_joined, self._encoded))
        if logs_joined:
            self._write_line(otlp_json_direct.logs_line(logs_joined, self._encoded))
        if len(spans_joined) + len(logs_joined) < len(items):  # SDK objects, metric points
            spans, logs = _split(items)
            if spans:
                self._write(otlp_json.skipping_unrepresentable(otlp_json.spans_request, spans))
            if logs:
                self._write(otlp_json.skipping_unrepresentable(otlp_json.logs_request, logs))
            points = _metric_points(items)
            if points:
                self._write(otlp_json.skipping_unrepresentable(otlp_json.metrics_request, points))
        self.out.flush()

    def _write(self, encoded: tuple[dict[str, Any] | None, int]) -> None:
        request, skipped = encoded
        self.failed += skipped
        if request is not None:
            self.out.write(otlp_json.dumps(request) + "\n")

    def _write_line(self, encoded: tuple[str | None, int]) -> None:
        line, skipped = encoded
        self.failed += skipped
        if line is not None:
            self.out.write(line + "\n")

    def close(self) -> None:
        pass


class TreeOutput:
    """The tree view, of spans and logs built into SDK objects (:mod:`.sdk_objects`)."""

    def __init__(self, out: TextIO) -> None:
        from opentelemetry_exporter_userevents.reader.outputs.exporters.tree_view import (  # noqa: PLC0415
            TreeView,
        )

        self.view = TreeView(out)
        self.failed = 0

    def write(self, items: Sequence[Item]) -> None:
        objects, failed = _sdk_objects(items)
        self.failed += failed
        self.view.add(objects)

    def close(self) -> None:
        self.view.flush()


class ExporterOutput:
    """Hands batches to the span, log and metric exporters registered under ``name`` (the
    entry points ``OTEL_TRACES_EXPORTER``, ``OTEL_LOGS_EXPORTER`` and ``OTEL_METRICS_EXPORTER``
    use), configured by their
    own environment variables (``OTEL_EXPORTER_OTLP_*`` for ``otlp``).

    For ``otlp_proto_http`` and ``otlp_proto_grpc`` (``direct``, the default), spans and
    logs need no SDK objects: the request bytes made straight from checked records are sent
    as the exporter would send them, within a deadline per request (:mod:`.direct_sender`),
    and
    ``sdk_objects`` is False; metric points are posted the same way, encoded by the
    exporter's encoder. Every other exporter gets SDK objects, built here
    (:mod:`.sdk_objects`)."""

    sdk_objects = True
    """Whether some spans or logs go to an exporter as SDK objects (built from their
    JoinedRecord), not posted by a direct sender."""

    def __init__(self, name: str, direct: bool = True, retry: RetryOnFailure | None = None) -> None:
        """``retry``: the direct senders' ``retry_on_failure`` (``record`` passes the
        Collector's defaults, :data:`DEFAULT_RETRY`, or its flags'); None: as the
        exporter's own client retries (6 attempts within its timeout)."""
        if name == "user_events":
            raise ValueError("re-exporting to user_events would feed the reader its own output")
        self.name = name
        self.spans = _load_exporter("opentelemetry_traces_exporter", name)
        self.logs = _load_exporter("opentelemetry_logs_exporter", name)
        self.metrics = _load_exporter("opentelemetry_metrics_exporter", name)
        if self.spans is None and self.logs is None and self.metrics is None:
            known = sorted(
                {e.name for e in entry_points(group="opentelemetry_traces_exporter")}
                | {e.name for e in entry_points(group="opentelemetry_logs_exporter")}
                | {e.name for e in entry_points(group="opentelemetry_metrics_exporter")}
            )
            raise ValueError(f"no exporter named {name!r}; installed: {', '.join(known)}")
        self.failed = 0
        """Spans and logs the exporters did not take."""
        self.exported_otherwise = 0
        """Items an SDK exporter (not a direct sender) took: its ``export`` said SUCCESS."""
        self.spool: Spool | None = None
        self.throttle = Throttle()
        """When the collector said it may be asked again (shared by the senders)."""
        self.gate = CollectorGate(throttle=self.throttle)
        """Whether the collector takes requests (used with a spool)."""
        self.backlog: Callable[[], int] = lambda: 0
        """Batches waiting for the output (the output stage's queue sets it): the spool
        drains while there are none."""
        self._not_sent: list[Item] = []
        self.progress: tuple[Sequence[Item] | None, Counter[str]] = (None, Counter())
        """The batch being written and its items whose requests ended, by kind (the output
        stage's kinds); read by the stage when it stops with this batch in flight."""
        from opentelemetry_exporter_userevents.reader.outputs.exporters import (  # noqa: PLC0415
            direct_sender,
        )

        self._direct_spans = direct_sender.direct_sender(self.spans, "spans") if direct else None
        self._direct_logs = direct_sender.direct_sender(self.logs, "logs") if direct else None
        self._direct_metrics = (
            direct_sender.direct_sender(self.metrics, "metrics") if direct else None
        )
        for sender in self._senders():
            if sender is not None:
                sender.configure(retry, self.throttle)
        if (self.spans is None or self._direct_spans is not None) and (
            self.logs is None or self._direct_logs is not None
        ):
            self.sdk_objects = False

    def write(self, items: Sequence[Item]) -> None:
        written = items
        self.progress = (written, Counter())
        joined = [i for i in items if type(i) is JoinedRecord]
        if self.spool is not None:
            self._not_sent = list(items)  # spooled at stop, if this write is still under way
        if joined and self.sdk_objects:  # an SDK exporter: spans and logs as SDK objects
            objects, failed = _sdk_objects(items)
            self.failed += failed
            items = objects
        elif joined:
            spans_joined = [i for i in joined if i.is_span]  # checked, or the core's fields
            logs_joined = [i for i in joined if not i.is_span]
            for exporter, sender, records in (
                (self.spans, self._direct_spans, spans_joined),
                (self.logs, self._direct_logs, logs_joined),
            ):
                if not records or exporter is None:
                    continue
                if self.spool is not None:
                    sending = {id(i) for i in records}
                    self._not_sent = [i for i in self._not_sent if id(i) not in sending]
                self.failed += len(records) if sender is None else sender.send(records)
                self._ended(written, "spans" if exporter is self.spans else "logs", len(records))
        spans, logs = _split(items)
        for kind, exporter, batch in (("spans", self.spans, spans), ("logs", self.logs, logs)):
            if exporter is None or not batch:
                continue
            try:
                result = exporter.export(batch)
            except Exception:  # noqa: BLE001 - a third-party exporter; count, keep reading
                result = None
            if getattr(result, "name", None) != "SUCCESS":
                self.failed += len(batch)
            else:
                self.exported_otherwise += len(batch)
            self._ended(written, kind, len(batch))
        points = _metric_points(items)
        self._not_sent = []
        if self._direct_metrics is not None and points:
            self.failed += self._direct_metrics.send(points)
        elif self.metrics is not None and points:
            try:
                result = self.metrics.export(metrics_data(points))
            except Exception:  # noqa: BLE001 - a third-party exporter; count, keep reading
                result = None
            if getattr(result, "name", None) != "SUCCESS":
                self.failed += len(points)
            else:
                self.exported_otherwise += len(points)
        if points:
            self._ended(written, "metric points", len(points))
        if self.spool is not None and (
            self.gate.probe_due()
            or (not self.gate.down and any(s is not None and s.taken for s in self._senders()))
        ):
            self._drain()  # the collector takes requests (again), or it is time to ask

    def _ended(self, written: Sequence[Item], kind: str, count: int) -> None:
        """``count`` items of ``kind`` of the batch being written reached their end (taken,
        or failed and counted): for the stage's count of a half-sent batch at stop. A new
        tuple each time: the stopping thread reads it while this one writes."""
        done = Counter(self.progress[1])
        done[kind] += count
        self.progress = (written, done)

    def use_spool(self, spool: Spool) -> None:
        """Requests the collector may take later go to ``spool`` (:mod:`.spool`), re-sent
        when it takes one again; only requests the direct senders post can be spooled.
        ``retry_on_failure`` is then the spool's: a request not taken within its timeout is
        spooled, and the spool re-sent by probes (:mod:`.collector_gate`), none before a
        delay the collector asked for."""
        senders = [s for s in self._senders() if s is not None]
        if not senders or self.sdk_objects:
            raise ValueError(
                "--spool keeps OTLP requests: it needs --exporter otlp_proto_http or "
                f"otlp_proto_grpc (not {self.name!r}, or an exporter configured beyond what "
                "the reader sends)"
            )
        self.spool = spool
        for sender in senders:
            sender.spool, sender.gate = spool, self.gate
            # The spool is the persistent queue, and its probes the retries: a request is
            # tried within its timeout (the exporter's client's retries), then spooled, so
            # that the memory queue never fills behind one request's long retry.
            sender.configure(None, self.throttle)

    def _senders(self) -> tuple[direct_sender.DirectSender | None, ...]:
        return (self._direct_spans, self._direct_logs, self._direct_metrics)

    def spool_batch(self, items: Sequence[Item]) -> Counter[str]:
        """At stop, on the stopping thread: a batch the output did not get to, spooled;
        its items spooled, by kind (as the output stage counts them)."""
        spooled: Counter[str] = Counter()
        joined = [i for i in items if type(i) is JoinedRecord]
        spans = [i for i in joined if i.is_span]
        logs = [i for i in joined if not i.is_span]
        points = _metric_points(items)
        for kind, sender, records in (
            ("spans", self._direct_spans, spans),
            ("logs", self._direct_logs, logs),
            ("metric points", self._direct_metrics, points),
        ):
            if sender is not None and records:
                spooled[kind] += sender.spool_records(records)
        return spooled

    def spool_in_flight(self) -> Counter[str]:
        """At stop: the requests being posted, and what the write under way has not sent
        yet, spooled; their items, by kind."""
        spooled = self.spool_batch(self._not_sent)
        for kind, sender in (
            ("spans", self._direct_spans),
            ("logs", self._direct_logs),
            ("metric points", self._direct_metrics),
        ):
            if sender is not None:
                spooled[kind] += sender.spool_in_flight()
        return spooled

    def idle(self) -> None:
        """Nothing to write: try the spool's oldest requests (on the output's thread), unless
        the collector is down and it is not yet time to ask again."""
        if not self.gate.down or self.gate.probe_due():
            self._drain()

    def _drain(self) -> None:
        """Re-send spooled requests, oldest first, until one is not taken, or the output
        has batches waiting (one at least is sent: the spool always moves on). A collector
        marked down gets one attempt (a probe) for the first."""
        spool = self.spool
        if spool is None:
            return
        if self.gate.down and spool.oldest() is None:
            self.gate.mark_up()  # nothing to probe with (the spool could not keep them):
            return  # the next request is posted, with its retries, and probes instead
        first = True
        senders = {
            "spans": self._direct_spans,
            "logs": self._direct_logs,
            "metrics": self._direct_metrics,
        }
        while (segment := spool.oldest()) is not None and (first or self.backlog() == 0):
            sender = senders.get(segment.kind)
            if sender is None:  # spooled by a reader that had this signal's exporter
                self.failed += segment.records
                spool.remove(segment, 0)
                continue
            done, failed = sender.resend(segment, probe=first and self.gate.down)
            first = False
            if not done:
                return
            self.failed += failed
            spool.remove(segment, segment.records - failed)

    def failed_by_reason(self) -> Counter[str]:
        """Records the direct senders did not deliver, by why (on the output's thread): the
        most common :data:`~.direct_sender.MAX_REASONS` reasons, the rest together."""
        from opentelemetry_exporter_userevents.reader.outputs.exporters import (  # noqa: PLC0415
            direct_sender,
        )

        reasons: Counter[str] = Counter()
        for sender in self._senders():
            if sender is not None:
                reasons.update(sender.failed_by_reason)
        kept: Counter[str] = Counter()
        for reason, count in reasons.most_common():
            if len(kept) >= direct_sender.MAX_REASONS and reason not in kept:
                reason = direct_sender.OTHER_REASONS
            kept[reason] += count
        return kept

    def delivered(self) -> dict[str, tuple[int, Counter[str], Any]]:
        """Per direct sender's kind (``spans``, ``logs``, ``metrics``): records the collector
        took, those that failed for good by reason, and each POST's durations by
        ``error.type`` (on the output's thread, for :mod:`.health_metrics`)."""
        counts: dict[str, tuple[int, Counter[str], Any]] = {}
        for kind, sender in zip(("spans", "logs", "metrics"), self._senders(), strict=True):
            if sender is not None:
                counts[kind] = (
                    sender.delivered,
                    Counter(sender.failed_by_reason),
                    sender.durations.copy(),
                )
        return counts

    def close(self) -> None:
        for sender in (self._direct_spans, self._direct_logs, self._direct_metrics):
            if sender is not None:
                sender.close()
        for exporter in (self.spans, self.logs, self.metrics):
            if exporter is not None:
                exporter.shutdown()


def _sdk_objects(items: Sequence[Item]) -> tuple[list[Any], int]:
    """:func:`.sdk_objects.sdk_objects`, imported with the SDK by the outputs that need it."""
    from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_objects import (  # noqa: PLC0415
        sdk_objects,
    )

    return sdk_objects(items)


def _load_exporter(group: str, name: str) -> Any:
    for entry in entry_points(group=group, name=name):
        return entry.load()()
    return None
