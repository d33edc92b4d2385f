# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's own health as telemetry (``record --health-interval``): the counts the
progress line and the summary already show, taken as they are (never counted twice), as
OTLP metric points of the reader's own resource (``service.name`` ``otel-userevents``,
``host.name``, ``process.pid``) and scope (:data:`SCOPE`).

Names follow the semantic conventions' SDK self-metrics where they fit, and
``otel_userevents.reader.*`` otherwise:

- ``otel.sdk.exporter.{span,log,metric_data_point}.exported``: records the collector took
  (no ``error.type``) or that failed for good (``error.type``: why, as the summary says it,
  without the collector's message); ``otel.sdk.exporter.{...}.inflight``: queued for the
  output or in its hands; ``otel.sdk.exporter.operation.duration`` (s): each POST to the
  collector, its retries included (``error.type`` when it was not taken). Each has
  ``otel.component.type`` (``otlp_http_span_exporter``...) and ``otel.component.name``.
- ``otel_userevents.reader.records.read``, ``.records.lost`` (by the kernel),
  ``.records.invalid`` (``otel_userevents.reason``; ``undecodable`` for no known format),
  ``.items.dropped`` (``otel_userevents.stage``, ``otel_userevents.reason``,
  ``otel_userevents.signal``), ``.items.spooled`` and ``.items.resent`` (the spool),
  ``.items.written`` (handed to the output), and the gauges ``.queue.batches``,
  ``.queue.size`` (estimated bytes), ``.spool.requests``, ``.spool.size`` (bytes) and
  ``.items.unaccounted`` (the delivery ledger's, :mod:`.exporterhelper.delivery_ledger`).
- ``otel_userevents.reader.kernel_events.dropped`` (``record --kernel``): kernel events
  over their process's budget, not summed, by ``process.pid`` (the most dropped; the rest
  without it).

:class:`Health` is one snapshot (:func:`gather`); :func:`health_points` makes the points,
:func:`health_lines` the text ``status`` shows, and :func:`write_health_file` /
:func:`read_health_file` keep it where ``status`` can read it (``--spool DIR``'s
``health-reader-<16 hex>.json``, each reader's own, 0600: :mod:`.health_files`).
"""

from __future__ import annotations

import bisect
import json
import os
import socket
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    NumberDataPoint,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery_ledger import Ledger
from opentelemetry_exporter_userevents.reader.outputs.health_file_writer import HealthFileWriter
from opentelemetry_exporter_userevents.reader.outputs.health_files import LEGACY, prune_exited
from opentelemetry_exporter_userevents.reader.private_file import open_private
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.version import __version__

SCOPE = "opentelemetry_exporter_userevents.reader"
SERVICE_NAME = "otel-userevents"
HEALTH_FILE = LEGACY
"""In ``--spool DIR``: the last snapshot of a reader of the version before (each reader now
writes its own: :func:`.health_files.health_file`)."""
DURATION_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
"""The semantic conventions' advice for request durations, in seconds."""
MAX_ERROR_TYPES = 8
"""Distinct ``error.type`` values a histogram keeps; past them, ``_OTHER``."""
OTHER = "_OTHER"

SIGNALS = {"spans": "span", "logs": "log", "metric points": "metric_data_point"}
"""The output stage's kinds, as the conventions' metric names say them."""
SENDER_KINDS = {"spans": "spans", "logs": "logs", "metrics": "metric points"}
UNITS = {"span": "{span}", "log": "{log_record}", "metric_data_point": "{data_point}"}
COMPONENTS = {
    "span": "otlp_http_span_exporter",
    "log": "otlp_http_log_exporter",
    "metric_data_point": "otlp_http_metric_exporter",
}


def error_type(reason: str) -> str:
    """A failure's reason as the summary says it, without what varies: the collector's
    message (after ``:``) and the attempts (``HTTP 503 after 3 attempts``: ``HTTP 503``)."""
    kept = reason.split(":", 1)[0]
    return kept.split(" after ", 1)[0].strip() or OTHER


class Durations:
    """A histogram of request durations by ``error.type`` (``""``: taken), recorded on the
    output's thread, copied on any (:meth:`copy`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_error: dict[str, dict[str, Any]] = {}

    def record(self, seconds: float, error: str = "") -> None:
        with self._lock:
            if error not in self.by_error and len(self.by_error) > MAX_ERROR_TYPES:
                error = OTHER
            found = self.by_error.get(error)
            if found is None:
                found = self.by_error[error] = {
                    "count": 0,
                    "sum": 0.0,
                    "min": seconds,
                    "max": seconds,
                    "buckets": [0] * (len(DURATION_BOUNDS) + 1),
                }
            found["count"] += 1
            found["sum"] += seconds
            found["min"] = min(found["min"], seconds)
            found["max"] = max(found["max"], seconds)
            found["buckets"][bisect.bisect_left(DURATION_BOUNDS, seconds)] += 1

    def copy(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {
                error: {**h, "buckets": list(h["buckets"])} for error, h in self.by_error.items()
            }


@dataclass
class Health:
    """One snapshot of the reader's counts (plain values: JSON as it is)."""

    time_ns: int = 0
    start_time_ns: int = 0
    pid: int = 0
    read: int = 0
    lost: int = 0
    """Records the kernel lost, and those left in a killed reader's instance (removed)."""
    invalid: dict[str, int] = field(default_factory=dict)
    """Invalid records by reason; ``undecodable`` for records of no known format."""
    dropped: list[tuple[str, str, str, int]] = field(default_factory=list)
    """(stage, reason, signal, items)."""
    inflight: dict[str, int] = field(default_factory=dict)
    """Items queued for the output or in its hands, by signal."""
    queue_batches: int = 0
    queue_bytes: int = 0
    spooled: dict[str, int] = field(default_factory=dict)
    resent: dict[str, int] = field(default_factory=dict)
    spool_requests: int = 0
    spool_bytes: int = 0
    spool_items: dict[str, int] = field(default_factory=dict)
    """Items left in the spool, by signal: with exported, failed, dropped, spooled less
    re-sent, every item handed to the output is in one bucket."""
    exported: dict[str, int] = field(default_factory=dict)
    """Records the collector took, by signal."""
    failed: list[tuple[str, str, int]] = field(default_factory=list)
    """(signal, error.type, records) that failed for good."""
    durations: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Per signal, the histogram of each POST (:class:`Durations`), by ``error.type``."""
    kernel_dropped: dict[str, int] = field(default_factory=dict)
    """Kernel events over their process's budget, by pid (``other``: the rest)."""
    written: int = 0
    """Items handed to the output; ``taken_over``: records of exited readers' spools."""
    taken_over: int = 0
    ledger: list[tuple[str, int]] = field(default_factory=list)
    """Every item in one bucket, (bucket, items), delivered first (:mod:`.delivery_ledger`)."""


def _signals(kinds: Counter[str] | dict[str, int]) -> dict[str, int]:
    return {SIGNALS.get(kind, kind): count for kind, count in kinds.items() if count}


def gather(reader: Any, join_stage: Any, stage: Any, start_time_ns: int) -> Health:
    """A snapshot of what the summary shows: the reader's records read and lost, the
    join_stage's invalid records, and the output stage's (:class:`.OutputStage`) queue,
    drops, spool and what its senders delivered (as of the output's last write)."""
    decoded = reader.decoder.stats
    invalid = dict(join_stage.stats.invalid_reasons)
    if decoded.undecodable:
        invalid["undecodable"] = decoded.undecodable
    batches, waiting = stage.counts()
    _items, queue_bytes, _dropped = stage.queue.counts()
    health = Health(
        time_ns=time.time_ns(),
        start_time_ns=start_time_ns,
        pid=os.getpid(),
        read=decoded.records,
        lost=reader.lost + getattr(getattr(reader, "tracefs_instance", None), "unread_in_stale", 0),
        invalid=invalid,
        inflight=_signals(waiting),
        queue_batches=batches,
        queue_bytes=queue_bytes,
    )
    health.kernel_dropped = _kernel_dropped(join_stage)
    book = stage.ledger()
    health.written, health.taken_over, health.ledger = book[0], book[1], list(book.buckets)
    dropped, not_delivered, delivered = stage.health_counts()
    for where, kinds in sorted(dropped.items()):
        stage_name, _, reason = where.partition(": ")
        for signal, count in sorted(_signals(kinds).items()):
            health.dropped.append((stage_name, reason or where, signal, count))
    for signal, count in sorted(_signals(not_delivered).items()):
        health.dropped.append(("output", "stop timeout", signal, count))
    spool = getattr(stage.output, "spool", None)
    if spool is not None:
        spooled, resent, spool_dropped, unwritten, _damaged = spool.totals()
        for reason, kinds in (("full", spool_dropped), ("not written", unwritten)):
            for kind, count in sorted(kinds.items()):
                if count:
                    signal = SIGNALS[SENDER_KINDS.get(kind, kind)]
                    health.dropped.append(("spool", reason, signal, count))
        health.spooled = {SIGNALS[SENDER_KINDS[k]]: n for k, n in spooled.items() if n}
        health.resent = {SIGNALS[SENDER_KINDS[k]]: n for k, n in resent.items() if n}
        health.spool_requests, health.spool_bytes = spool.counts()
        health.spool_items = {SIGNALS[SENDER_KINDS[k]]: n for k, n in spool.left().items() if n}
    for kind, (taken, failed, durations) in delivered.items():
        signal = SIGNALS[SENDER_KINDS[kind]]
        health.exported[signal] = taken
        for reason, count in sorted(failed.items()):
            health.failed.append((signal, error_type(reason), count))
        if durations:
            health.durations[signal] = durations
    return health


def _kernel_dropped(join_stage: Any) -> dict[str, int]:
    """The kernel view's events over their process's budget, by pid (its
    ``kernel_event_budget.EventBudget``, when the join_stage has a kernel view)."""
    events = getattr(getattr(join_stage, "span_enricher", None), "events", None)
    budget = getattr(getattr(events, "timeline", None), "budget", None)
    counts: dict[str, int] = {}
    for key, count in budget.by_process() if budget is not None else ():
        pid = getattr(key, "pid", None)
        name = str(pid) if isinstance(pid, int) else "other"
        counts[name] = counts.get(name, 0) + count
    return counts


def _resource() -> Resource:
    return Resource(
        {
            "service.name": SERVICE_NAME,
            "host.name": socket.gethostname(),
            "process.pid": os.getpid(),
        }
    )


_SCOPE = InstrumentationScope(SCOPE, __version__)
_RESOURCE: Resource | None = None


def health_points(health: Health) -> list[MetricPoint]:
    """The metric points of ``health``: cumulative sums from the reader's start, gauges
    (non-monotonic sums) of what waits, a histogram of each POST."""
    global _RESOURCE  # noqa: PLW0603 - one resource per process, as an SDK has
    if _RESOURCE is None:
        _RESOURCE = _resource()
    resource = _RESOURCE
    start, now = health.start_time_ns, health.time_ns
    cumulative = AggregationTemporality.CUMULATIVE
    points: list[MetricPoint] = []

    def add(name: str, unit: str, value: int, attributes: dict[str, Any], monotonic: bool,
            description: str) -> None:  # fmt: skip
        point = NumberDataPoint(attributes, start, now, value)
        points.append(
            MetricPoint(
                resource, _SCOPE, name, description, unit, mv.KIND_SUM, cumulative, monotonic, point
            )  # fmt: skip
        )

    reader = "otel_userevents.reader."
    add(reader + "records.read", "{record}", health.read, {}, True,
        "Records read from the kernel's buffers.")  # fmt: skip
    add(reader + "records.lost", "{record}", health.lost, {}, True,
        "Records the kernel dropped or overwrote before the reader read them.")  # fmt: skip
    for reason, count in sorted(health.invalid.items()):
        add(reader + "records.invalid", "{record}", count, {"otel_userevents.reason": reason},
            True, "Records not rebuilt: invalid, by reason.")  # fmt: skip
    for stage, reason, signal, count in health.dropped:
        attributes = {
            "otel_userevents.stage": stage,
            "otel_userevents.reason": reason,
            "otel_userevents.signal": signal,
        }
        add(reader + "items.dropped", "{item}", count, attributes, True,
            "Items dropped on the way to the collector, by stage and reason.")  # fmt: skip
    for label, counts in (("spooled", health.spooled), ("resent", health.resent)):
        for signal, count in sorted(counts.items()):
            add(reader + f"items.{label}", "{item}", count, {"otel_userevents.signal": signal},
                True, f"Items {label} (--spool).")  # fmt: skip
    if health.ledger:
        add(reader + "items.written", "{item}", health.written, {}, True,
            "Items handed to the output (the delivery ledger's written).")  # fmt: skip
        add(reader + "items.unaccounted", "{item}", _ledger(health).unaccounted, {}, False,
            "Items in no bucket of the delivery ledger: 0 when each is counted once.")  # fmt: skip
    for pid, count in sorted(health.kernel_dropped.items()):
        add(reader + "kernel_events.dropped", "{event}", count,
            {"process.pid": int(pid)} if pid.isdigit() else {}, True,
            "Kernel events over their process's budget (--kernel): not summed.")  # fmt: skip
    for name, unit, value in (
        ("queue.batches", "{batch}", health.queue_batches),
        ("queue.size", "By", health.queue_bytes),
        ("spool.requests", "{request}", health.spool_requests),
        ("spool.size", "By", health.spool_bytes),
    ):
        add(reader + name, unit, value, {}, False, "What waits now.")
    for signal, count in sorted(health.spool_items.items()):
        add(reader + "spool.items", "{item}", count, {"otel_userevents.signal": signal}, False,
            "Items left in the spool now (--spool).")  # fmt: skip
    for signal, unit in UNITS.items():
        component = {"otel.component.type": COMPONENTS[signal],
                     "otel.component.name": f"{COMPONENTS[signal]}/0"}  # fmt: skip
        prefix = f"otel.sdk.exporter.{signal}."
        add(prefix + "inflight", unit, health.inflight.get(signal, 0), component, False,
            "Items handed to the output, neither exported nor failed yet.")  # fmt: skip
        if signal in health.exported:
            add(prefix + "exported", unit, health.exported[signal], component, True,
                "Items the collector took, or (error.type) that failed.")  # fmt: skip
        for failed_signal, error, count in health.failed:
            if failed_signal == signal:
                add(prefix + "exported", unit, count, {**component, "error.type": error}, True,
                    "Items the collector took, or (error.type) that failed.")  # fmt: skip
        for error, histogram in sorted(health.durations.get(signal, {}).items()):
            attributes = dict(component)
            if error:
                attributes["error.type"] = error
            point = HistogramDataPoint(
                attributes, start, now, histogram["count"], histogram["sum"],
                tuple(histogram["buckets"]), DURATION_BOUNDS, histogram["min"], histogram["max"],
            )  # fmt: skip
            points.append(
                MetricPoint(
                    resource,
                    _SCOPE,
                    "otel.sdk.exporter.operation.duration",
                    "The duration of each export operation (a POST, its retries included).",
                    "s",
                    mv.KIND_HISTOGRAM,
                    cumulative,
                    False,
                    point,
                )  # fmt: skip
            )
    return points


def health_lines(health: Health) -> list[str]:
    """What ``status`` shows of a snapshot."""
    failed: Counter[str] = Counter()
    for signal, _error, count in health.failed:
        failed[signal] += count
    lines = [
        f"records: {health.read} read, {health.lost} lost by the kernel, "
        f"{sum(health.invalid.values())} invalid",
    ]
    lines += [f"  invalid ({reason}): {count}" for reason, count in sorted(health.invalid.items())]
    lines += [f"  kernel events over budget (pid {pid}): {count}"
              for pid, count in sorted(health.kernel_dropped.items())]  # fmt: skip
    lines += [
        f"  dropped ({stage}: {reason}): {count} {signal}"
        for stage, reason, signal, count in health.dropped
    ]
    lines.append(
        "output: "
        + ", ".join(f"{health.inflight.get(s, 0)} {s} in flight" for s in UNITS)
        + f"; {health.queue_batches} batches ({health.queue_bytes} bytes) queued"
    )
    for signal in UNITS:
        if signal in health.exported or failed[signal]:
            lines.append(
                f"  exported {signal}: {health.exported.get(signal, 0)} taken, "
                f"{failed[signal]} failed"
            )
    lines += [f"  failed {signal} ({error}): {count}" for signal, error, count in health.failed]
    for signal, by_error in sorted(health.durations.items()):
        for error, histogram in sorted(by_error.items()):
            mean = histogram["sum"] / histogram["count"] if histogram["count"] else 0.0
            lines.append(
                f"  {signal} requests{' (' + error + ')' if error else ''}: "
                f"{histogram['count']}, mean {mean:.3f} s, max {histogram['max']:.3f} s"
            )
    if health.ledger:
        lines.append(_ledger(health).line())
    if health.spool_requests or health.spooled or health.resent:
        lines.append(
            f"spool: {health.spool_requests} requests ({health.spool_bytes} bytes, "
            f"{sum(health.spool_items.values())} items left), "
            f"{sum(health.spooled.values())} items spooled, "
            f"{sum(health.resent.values())} re-sent"
        )
    return lines


def _ledger(health: Health) -> Ledger:
    return Ledger(health.written, health.taken_over, tuple(health.ledger))


def write_health_file(directory: str, health: Health, name: str = HEALTH_FILE) -> None:
    """``health`` as JSON in ``directory``'s file ``name`` (0600, never through a symlink),
    replaced whole: written to a temporary name of its own, then renamed."""
    temporary = os.path.join(directory, f".{name}.tmp")
    with open_private(temporary) as f:
        json.dump(asdict(health), f)
    os.replace(temporary, os.path.join(directory, name))


MAX_HEALTH_FILE = 1024 * 1024


def read_health_file(directory: str, name: str = HEALTH_FILE) -> Health | None:
    """The snapshot a reader left in ``directory``'s file ``name``; None if there is none
    or it is not one (read within :data:`MAX_HEALTH_FILE` bytes, never through a symlink)."""
    try:
        fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_HEALTH_FILE + 1)
    if len(data) > MAX_HEALTH_FILE:
        return None
    try:
        fields = json.loads(data)
        health = Health(**fields)
        health.dropped = [tuple(d) for d in health.dropped]  # type: ignore[misc]
        health.failed = [tuple(f) for f in health.failed]  # type: ignore[misc]
        health.ledger = [(str(label), int(n)) for label, n in health.ledger]
    except (ValueError, TypeError):
        return None
    for counts in (health.kernel_dropped, health.spool_items):
        if not isinstance(counts, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in counts.items()
        ):
            return None
    return health


class HealthReporter:
    """Every ``interval`` seconds (and once at stop), a snapshot: its points handed to the
    output (``send``), and, with ``directory``, the health file written (on a thread of its
    own: :mod:`.health_file_writer`), as ``name`` (each reader's own, :mod:`.health_files`;
    the exited readers' files past the newest few removed at start)."""

    def __init__(
        self,
        interval: float,
        started: float,
        send: bool,
        directory: str | None = None,
        name: str = HEALTH_FILE,
    ) -> None:
        self.interval = interval
        self.send = send
        self.directory = directory
        self.start_time_ns = time.time_ns()
        self.next = started + interval
        self.file: HealthFileWriter[Health] | None = None
        """Writes the health file off the read loop (with ``directory``)."""
        if directory is not None:
            prune_exited(directory, name)
            self.file = HealthFileWriter(
                directory, lambda where, health: write_health_file(where, health, name)
            )

    @property
    def error(self) -> str | None:
        """Why the health file could not be written (the first time), for the summary."""
        return None if self.file is None else self.file.error

    def finish(self, deadline: float) -> None:
        """At stop: the last health file written, or ``deadline`` passed (a stalled disk)."""
        if self.file is not None:
            self.file.finish(deadline)

    def due(self, now: float) -> bool:
        return self.interval > 0 and now >= self.next

    def report(self, reader: Any, join_stage: Any, stage: Any, now: float) -> None:
        self.next = now + self.interval
        health = gather(reader, join_stage, stage, self.start_time_ns)
        if self.file is not None:
            self.file.offer(health)  # written on the health file's thread
        if self.send:
            stage.write(health_points(health))
