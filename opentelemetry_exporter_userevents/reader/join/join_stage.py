# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Decoded records joined to their resources and scopes: checked spans and logs as
:class:`JoinedRecord` (an output writes them straight, :mod:`.otlp_json_direct`, or builds
the SDK's ``ReadableSpan`` and ``ReadableLogRecord`` from them, :mod:`.sdk_objects`), and
metric points; counted.

Every record first crosses the validation boundary (:mod:`.record_check`), here or, with
``--workers``, in the worker that decoded it (:mod:`.joinable`: an encoded span or log and
what the join reads of it): one whose fields do not have their schema's shape is skipped
and counted, by reason and by writer pid, and the records around it are unharmed. The join
reads only checked fields, so both kinds of record join and count alike.

Each record carries a ``resource_id``; the resource itself arrives on its own tracepoint
(see docs/schema.md), and is learnt only if the id is the hash of its texts, so no process
can replace a resource another announced. An EventHeader record (the Rust, C++ and .NET
exporters') has no resource record: the resource its writer names comes beside it, with an
id of its own domain (:mod:`.eventheader_check`), and is learnt first; so is the resource
of an ``otlp_metrics`` record, whose request becomes several points (:mod:`.otlp_metrics_check`:
a point dropped alone is counted as an invalid record). Records whose
resource is not known yet wait for it, up to ``resource_wait`` seconds, and are then
released with an empty resource (counted). Resources and scopes come back as the SDK
stores them (attribute sequences as tuples), one Resource and one InstrumentationScope
object per distinct value (the OTLP encoders group by them).

With a :class:`.process_view.ProcessViews` (``record`` only: a capture's pids are another
time's), each record's resource also gets what the host sees of its writer (its pid, the
kernel's ``common_pid``): ``container.id``, ``host.name``, the host's ``process.pid``. The
same resource id can come from two processes in two containers (the same app makes the same
resource), so the view is the record's, and there is one Resource object per resource id
and view (:data:`MAX_JOINED_RESOURCES`, made again when forgotten: equal objects group
alike). Without one, resources are exactly as their records announced them.

Memory is bounded whatever the writers do (the ``MAX_*`` constants): the oldest resource is
forgotten past ``MAX_RESOURCES`` (it is announced again within its interval), the records
waiting longest are released without their resource past ``MAX_PENDING_RECORDS`` or
``MAX_PENDING_RESOURCES`` ids, and services past ``MAX_SERVICES`` are counted together; each
eviction is counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedLog,
    CheckedMetric,
    CheckedResource,
    CheckedScope,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import provider_of
from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord, RejectedRecord
from opentelemetry_exporter_userevents.reader.decode.record_check import Passed, RecordCheck
from opentelemetry_exporter_userevents.reader.join.joined_record import (
    JoinedRecord as JoinedRecord,  # noqa: PLC0414 - outputs and tests import it from here too
)
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint, rebuild_point
from opentelemetry_exporter_userevents.reader.join.sdk_values import (
    bounded_attributes,
    sdk_attributes,
)
from opentelemetry_exporter_userevents.reader.views.process_view import (
    ProcessView,
    ProcessViews,
    merged_resource,
)
from opentelemetry_exporter_userevents.record.tracepoints import (
    LOG_KIND,
    RESOURCE_KIND,
    SPAN_KIND,
    parse_tracepoint,
)

Telemetry = JoinedRecord | MetricPoint
"""What the join hands the outputs: spans and logs joined, metric points built."""

MAX_RESOURCES = 4096
"""Resources kept; past this the one learnt first is forgotten (``resources_evicted``)."""
MAX_PENDING_RECORDS = 100_000
"""Records kept waiting for their resource, all ids together."""
MAX_PENDING_RESOURCES = 4096
"""Distinct unknown resource ids that records may wait for."""
MAX_SERVICES = 1024
"""Services counted by name; records of more are counted in ``other_services``."""
MAX_INVALID_PIDS = 64
"""Writer pids whose invalid records are counted by pid; more in ``invalid_other_pids``."""
MAX_JOINED_RESOURCES = 4096
"""Resources joined with a writer's view kept (the first made is forgotten, and made again
when needed: nothing is lost)."""

Joinable = CheckedSpan | CheckedLog | CheckedMetric | EncodedRecord
"""What the join takes (:mod:`.joinable`): a record checked here, or by a worker."""
Incoming = TraceRecord | EncodedRecord | RejectedRecord | CheckedSpan
"""What :meth:`JoinStage.add` takes: decoded records (checked here), and a worker's."""


@dataclass
class JoinStats:
    spans: int = 0
    logs: int = 0
    metric_points: int = 0
    resources: int = 0
    """Distinct resources learnt."""
    truncated: int = 0
    """Records the writer had to cut to fit (their ``truncated`` bits are set)."""
    without_resource: int = 0
    """Records released with an empty resource: theirs never arrived, or waited too long
    for a table that was full (also counted in ``pending_evicted``)."""
    invalid: int = 0
    """Records whose fields do not have their schema's shape (skipped)."""
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    """Invalid records per reason (a fixed vocabulary: ``span.attributes: not a JSON
    object``)."""
    invalid_pids: dict[int, int] = field(default_factory=dict)
    """Invalid records per writer pid (the kernel's ``common_pid``), for the first
    ``MAX_INVALID_PIDS`` pids."""
    invalid_other_pids: int = 0
    resources_evicted: int = 0
    pending_evicted: int = 0
    """Records released early, without their resource, because the wait table was full."""
    services: dict[str, int] = field(default_factory=dict)
    """Records rebuilt per service (``service.name`` of their resource, else the
    tracepoint prefix they came from), for the first ``MAX_SERVICES`` services."""
    other_services: int = 0

    def count_invalid(self, reason: str, pid: int) -> None:
        self.invalid += 1
        self.invalid_reasons[reason] = self.invalid_reasons.get(reason, 0) + 1
        if pid in self.invalid_pids or len(self.invalid_pids) < MAX_INVALID_PIDS:
            self.invalid_pids[pid] = self.invalid_pids.get(pid, 0) + 1
        else:
            self.invalid_other_pids += 1


class JoinStage:
    """Turns decoded records into :class:`JoinedRecord` (spans and logs) and MetricPoint,
    resources and scopes joined. An output that needs ReadableSpan and ReadableLogRecord
    builds them itself (:mod:`..outputs.exporters.sdk_objects`)."""

    def __init__(
        self,
        resource_wait: float = 11.0,
        process_views: ProcessViews | None = None,
        span_enricher: Callable[[CheckedSpan, int], CheckedSpan] | None = None,
    ) -> None:
        """``span_enricher(span, writer_tid)``: a span with what it adds (``--kernel``)."""
        self.resource_wait = resource_wait
        self.span_enricher = span_enricher
        self.process_views = process_views
        """What the host sees of each writer pid, added to its records' resources; None:
        nothing added."""
        self.stats = JoinStats()
        self.door = RecordCheck()
        """The validation door for records decoded in this process (a worker's crossed
        it where they were decoded)."""
        self._resources: dict[int, Resource] = {}
        self._scopes: dict[str, InstrumentationScope | None] = {}
        self._pending: dict[int, list[tuple[float, Joinable, ProcessView | None]]] = {}
        self._pending_count = 0
        self._joined: dict[tuple[int | None, ProcessView], Resource] = {}
        self._services: dict[tuple[int, str], tuple[Resource, str]] = {}

    def add(self, records: Sequence[Incoming]) -> list[Telemetry]:
        """Rebuild ``records`` (in order); return what is ready, including records that
        were waiting for a resource that has now arrived or waited too long. Decoded
        records cross the validation boundary here; a worker's already did."""
        ready: list[Telemetry] = []
        now = time.monotonic()
        views = self.process_views
        check = self.door.check
        passed: list[Passed] = []
        for record in records:
            if isinstance(record, TraceRecord):
                if views is not None and record.kind == RESOURCE_KIND:
                    views.refresh(record.pid)
                check(record, passed)
                for item in passed:
                    self._join(item, now, ready)
                passed.clear()
            else:  # a worker's: checked where it was decoded
                self._join(record, now, ready)
        # Ids wait in the order their first record came: the first that is not due ends it.
        while self._pending:
            rid, oldest = next(iter(self._pending.items()))
            if now - oldest[0][0] < self.resource_wait:
                break
            self._release(rid, ready)
        return ready

    def _join(
        self,
        item: Passed | EncodedRecord | CheckedSpan,
        now: float,
        ready: list[Telemetry],
    ) -> None:
        """One record past the door: counted if refused, learnt if a resource, else
        joined (or kept waiting for its resource)."""
        if isinstance(item, RejectedRecord):
            self.stats.count_invalid(item.reason, item.pid)
        elif isinstance(item, CheckedResource):
            self._arrived(item, ready)
        else:
            if type(item) is EncodedRecord and item.resource is not None:
                self._arrived(item.resource, ready)
            self._take(item, now, ready)

    def _take(self, checked: Joinable, now: float, ready: list[Telemetry]) -> None:
        """Rebuild a checked record with its resource, or keep it waiting for it."""
        views = self.process_views
        view = views.view(checked.pid, now) if views is not None else None
        rid = checked.resource_id
        resource = self._resources.get(rid)
        if resource is None:
            self._wait(checked, now, ready, view)
        elif view is None:
            self._rebuild(checked, ready, resource)
        else:
            self._rebuild(checked, ready, self._with_view(rid, resource, view))

    def _arrived(self, checked: CheckedResource, ready: list[Telemetry]) -> None:
        """Learn a resource, and rebuild the records that waited for it."""
        learnt = self._learn_resource(checked)
        if learnt is not None and learnt in self._pending:
            known = self._resources[learnt]
            for _, its_checked, its_view in self._pop_pending(learnt):
                if its_view is not None:
                    self._rebuild(its_checked, ready, self._with_view(learnt, known, its_view))
                else:
                    self._rebuild(its_checked, ready, known)

    def flush(self) -> list[Telemetry]:
        """Release every waiting record, with an empty resource."""
        ready: list[Telemetry] = []
        for rid in list(self._pending):
            self._release(rid, ready)
        return ready

    @property
    def pending(self) -> int:
        return self._pending_count

    def _with_view(self, rid: int | None, resource: Resource, view: ProcessView) -> Resource:
        """``resource`` (of id ``rid``; None: the empty one) with what ``view`` adds, one
        object per resource id and view."""
        key = (rid, view)
        joined = self._joined.get(key)
        if joined is None:
            assert self.process_views is not None
            joined = merged_resource(resource, view, self.process_views.host_name)
            if len(self._joined) >= MAX_JOINED_RESOURCES:
                del self._joined[next(iter(self._joined))]
            self._joined[key] = joined
        return joined

    def _wait(
        self, checked: Joinable, now: float, ready: list[Telemetry], view: ProcessView | None
    ) -> None:
        rid = checked.resource_id
        while self._pending and (
            self._pending_count >= MAX_PENDING_RECORDS
            or (rid not in self._pending and len(self._pending) >= MAX_PENDING_RESOURCES)
        ):
            oldest = next(iter(self._pending))
            self.stats.pending_evicted += len(self._pending[oldest])
            self._release(oldest, ready)
        self._pending.setdefault(rid, []).append((now, checked, view))
        self._pending_count += 1

    def _pop_pending(self, rid: int) -> list[tuple[float, Joinable, ProcessView | None]]:
        waiting = self._pending.pop(rid)
        self._pending_count -= len(waiting)
        return waiting

    def _release(self, rid: int, ready: list[Telemetry]) -> None:
        waiting = self._pop_pending(rid)
        self.stats.without_resource += len(waiting)
        empty = Resource.get_empty()
        for _, checked, view in waiting:
            resource = empty if view is None else self._with_view(None, empty, view)
            self._rebuild(checked, ready, resource)

    def _learn_resource(self, checked: CheckedResource) -> int | None:
        rid = checked.resource_id
        if rid in self._resources:
            return None  # the id is the hash of the texts: the same resource again
        resource = Resource(sdk_attributes(checked.attributes), checked.schema_url or None)
        if len(self._resources) >= MAX_RESOURCES:
            del self._resources[next(iter(self._resources))]
            self.stats.resources_evicted += 1
        self._resources[rid] = resource
        self.stats.resources += 1
        return rid

    def _rebuild(self, checked: Joinable, ready: list[Telemetry], resource: Resource) -> None:
        stats = self.stats
        try:
            scope = self.scope(checked.scope_text, checked.scope)
            if type(checked) is EncodedRecord:  # the native core's or a worker's (an output
                # that needs SDK objects counts it in ``failed``; they are made for others)
                ready.append(JoinedRecord(checked, resource, scope))
                if checked.kind == SPAN_KIND:
                    stats.spans += 1
                else:
                    stats.logs += 1
            elif isinstance(checked, CheckedSpan):
                if self.span_enricher is not None:
                    checked = self.span_enricher(checked, checked.pid)
                ready.append(JoinedRecord(checked, resource, scope))
                stats.spans += 1
            elif isinstance(checked, CheckedLog):
                ready.append(JoinedRecord(checked, resource, scope))
                stats.logs += 1
            elif isinstance(checked, CheckedMetric):
                ready.append(rebuild_point(checked, resource, scope))
                stats.metric_points += 1
        except Exception:  # noqa: BLE001 - checked values the SDK still refused: count, go on
            reason = f"{_kind(checked)}: the SDK refused its checked values"
            stats.count_invalid(reason, checked.pid)
            return
        if checked.truncated:
            stats.truncated += 1
        service = self._service(resource, checked.tracepoint)
        if service in stats.services or len(stats.services) < MAX_SERVICES:
            stats.services[service] = stats.services.get(service, 0) + 1
        else:
            stats.other_services += 1

    def _service(self, resource: Resource, tracepoint: str) -> str:
        """The service a record is counted under: its resource's ``service.name``, else what
        its tracepoint names; kept per resource object and tracepoint (a record's resource
        is one of few objects, and reading a Resource's attributes is not cheap)."""
        key = (id(resource), tracepoint)
        known = self._services.get(key)
        if known is not None and known[0] is resource:
            return known[1]
        service = resource.attributes.get("service.name")
        if not isinstance(service, str):
            service = _service_of(tracepoint)
        if len(self._services) >= MAX_JOINED_RESOURCES:
            self._services.clear()
        self._services[key] = (resource, service)  # the object kept: its id stays its own
        return service

    def scope(self, text: str, checked: CheckedScope | None) -> InstrumentationScope | None:
        """The scope of a record's checked ``scope``, one object per distinct text."""
        try:
            return self._scopes[text]
        except KeyError:
            pass
        scope = None
        if checked is not None:
            scope = InstrumentationScope(
                checked.name,
                checked.version,
                checked.schema_url,
                bounded_attributes(checked.attributes),
            )
        if len(self._scopes) >= 1024:
            self._scopes.clear()
        self._scopes[text] = scope
        return scope


def _service_of(tracepoint: str) -> str:
    """What names a service without ``service.name``: our prefix, an EventHeader provider."""
    parsed = parse_tracepoint(tracepoint)
    if parsed is not None:
        return f"prefix {parsed.prefix}"
    provider = provider_of(tracepoint)
    return f"provider {provider}" if provider is not None else "unknown"


def _kind(checked: Joinable) -> str:
    """The record kind of ``checked`` (record.tracepoints ``*_KIND``), for a reason."""
    if isinstance(checked, EncodedRecord):
        return checked.kind
    if isinstance(checked, CheckedSpan):
        return SPAN_KIND
    if isinstance(checked, CheckedLog):
        return LOG_KIND
    parsed = parse_tracepoint(checked.tracepoint)
    return parsed.kind if parsed is not None else "metric"
