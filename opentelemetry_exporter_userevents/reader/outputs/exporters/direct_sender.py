# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Spans, logs and metric points sent as requests of their own making, not through an
exporter's ``export``: the request bytes :mod:`.otlp_proto_direct` makes straight from
checked records (the bytes the exporter would have made of the SDK objects), and metric
points in the request the exporter's own encoder makes of them (``encode_metrics``), unless
the exporter splits its requests (``_max_export_batch_size``).

A :class:`DirectSender` hands each request to a poster, which sends it as the exporter
would (its endpoint, headers, compression, timeout, credentials) within a total deadline,
retrying as the OTLP specification says (:mod:`.delivery`): :mod:`.otlp_http_post` for
``otlp_proto_http`` (its client's configuration read by :mod:`.otlp_http_output`),
:mod:`.otlp_grpc_post` for ``otlp_proto_grpc``. The sender counts what was not delivered by
reason, ``partial_success`` rejections included, and hands what the collector may take
later to the spool (:mod:`.spool`). :func:`direct_sender` makes one only for the exact
exporter classes whose configuration the posters read; any other exporter gets SDK objects.

What differs from the exporter's ``export``: a span or log the encoder cannot carry (a name
with a lone surrogate, a log body integer beyond 64 bits) is left out and counted, where
the exporter would fail its whole batch; and the exporter's own metrics
(``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED``) would not see these requests, so with them
enabled the SDK objects path is taken.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint, metrics_data
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.collector_gate import (
    CollectorGate,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import (
    Delivery,
    RetryOnFailure,
    Throttle,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Segment, Spool
from opentelemetry_exporter_userevents.reader.outputs.exporters import (
    otlp_http_output,
    otlp_proto_direct,
)
from opentelemetry_exporter_userevents.reader.outputs.health_metrics import Durations, error_type

_logger = logging.getLogger(__name__)

_HTTP = "opentelemetry.exporter.otlp.proto.http"
_GRPC = "opentelemetry.exporter.otlp.proto.grpc"
_EXPORTERS = {
    "spans": ("trace_exporter", "OTLPSpanExporter"),
    "logs": ("_log_exporter", "OTLPLogExporter"),
    "metrics": ("metric_exporter", "OTLPMetricExporter"),
}
_DEFAULT_MAX_REQUEST_SIZE = 64 * 1024 * 1024
_INTERNAL_METRICS = "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"

MAX_REASONS = 8
"""Distinct reasons a sender counts its failed records by, and the summary names (a
collector's messages vary); past this many, records count under :data:`OTHER_REASONS`."""
OTHER_REASONS = "other reasons"

Encode = Callable[[Sequence[Any], otlp_proto_direct.RequestCache], tuple[bytes | None, int]]


class Post(Protocol):
    """What a sender posts its requests with: :class:`.otlp_http_post.Poster` or
    :class:`.otlp_grpc_post.GrpcPoster`."""

    retry: RetryOnFailure | None
    throttle: Throttle | None

    def deliver(self, data: bytes, attempts: int | None = ...) -> Delivery:
        """Send ``data`` until it is taken, ``attempts`` are made, or the deadline; what
        became of it (never raises)."""
        ...

    def close(self) -> None: ...


class DirectSender:
    """Posts the requests of checked records (or of metric points) as an OTLP exporter
    (OTLP/HTTP or OTLP/gRPC) would."""

    def __init__(self, poster: Post, max_request_size: int, encode: Encode, kind: str) -> None:
        self._poster = poster
        self._max_request_size = max_request_size
        self._encode = encode
        self._kind = kind
        self._cache = otlp_proto_direct.RequestCache()
        self.failed_by_reason: Counter[str] = Counter()
        """Records not delivered, by why: an answer (``HTTP 400 Bad Request: message``),
        none after the retries, a ``partial_success`` rejection (``rejected by the
        collector: message``); at most :data:`MAX_REASONS` reasons."""

        self.spool: Spool | None = None
        """Where requests the collector may take later go (``--spool``)."""
        self.gate: CollectorGate | None = None
        """With a spool: whether the collector takes requests (shared by the senders)."""
        self.taken = False
        """Whether the last request was taken (the collector answers: drain the spool)."""
        self.in_flight: tuple[bytes, int] | None = None
        """The request being posted and its records (spooled at stop if still there)."""
        self.delivered = 0
        """Records the collector took (less those its ``partial_success`` rejected)."""
        self.durations = Durations()
        """Each request's duration, its retries included, by ``error.type`` when not taken."""

    def configure(self, retry: RetryOnFailure | None, throttle: Throttle | None) -> None:
        """Retries as the Collector's ``retry_on_failure`` (None: as the exporter's client),
        no attempt before the shared ``throttle``."""
        self._poster.retry = retry
        self._poster.throttle = throttle

    def _deliver(self, data: bytes, probe: bool = False) -> Delivery:
        """Posted (one attempt for a ``probe`` of a collector marked down); the gate marked
        by what became of it."""
        started = time.monotonic()
        delivery = self._poster.deliver(data, 1) if probe else self._poster.deliver(data)
        failed = "" if delivery.taken else error_type(delivery.reason or "not taken")
        self.durations.record(time.monotonic() - started, failed)
        if self.gate is not None:
            if delivery.taken:
                self.gate.mark_up()
            elif delivery.later:
                self.gate.mark_down()
        return delivery

    def _count(self, reason: str, records: int) -> None:
        if reason not in self.failed_by_reason and len(self.failed_by_reason) >= MAX_REASONS:
            reason = OTHER_REASONS
        self.failed_by_reason[reason] += records

    def send(self, records: Sequence[Any]) -> int:
        """Post one request of ``records``; how many were not delivered (never raises)."""
        try:
            data, failed = self._encode(records, self._cache)
        except Exception:  # noqa: BLE001 - a checked value the encoding still refused
            _logger.exception("Failed to encode %s batch", self._kind)
            self._count("the encoder failed", len(records))
            return len(records)
        if data is None:
            return failed
        if 0 < self._max_request_size < len(data):
            _logger.warning(
                "Dropping %s batch: serialized size %d bytes exceeds max_request_size %d bytes.",
                self._kind,
                len(data),
                self._max_request_size,
            )
            self._count("larger than the exporter's max_request_size", len(records))
            return len(records)
        if self.spool is not None and self.gate is not None and self.gate.down:
            self.spool.put(self._kind, len(records) - failed, data)  # or counted dropped
            return failed  # the collector is down: spooled at once, not posted
        self.in_flight = (data, len(records) - failed)
        delivery = self._deliver(data)  # the poster logged what went wrong
        self.in_flight = None
        self.taken = delivery.taken
        if not delivery.taken:
            if delivery.later and self.spool is not None:
                self.spool.put(self._kind, len(records) - failed, data)  # or counted dropped
                return failed
            self._count(delivery.reason or "not taken", len(records))
            return len(records)
        rejected = min(delivery.rejected, len(records) - failed)
        if rejected:
            message = f": {delivery.message}" if delivery.message else ""
            self._count(f"rejected by the collector{message}", rejected)
        self.delivered += len(records) - failed - rejected
        return failed + rejected

    def spool_records(self, records: Sequence[Any]) -> int:
        """At stop, on the stopping thread: ``records`` encoded (a cache of its own: the
        output's thread may still use its own) and spooled; how many were spooled."""
        if self.spool is None:
            return 0
        try:
            data, failed = self._encode(records, otlp_proto_direct.RequestCache())
        except Exception:  # noqa: BLE001 - counted as not delivered by the stage
            return 0
        if data is None or not self.spool.put(self._kind, len(records) - failed, data):
            return 0
        return len(records) - failed

    def spool_in_flight(self) -> int:
        """At stop: the request still being posted, spooled (the collector may have taken
        it already: then it is sent twice); its records spooled."""
        in_flight = self.in_flight
        if self.spool is None or in_flight is None:
            return 0
        data, records = in_flight
        return records if self.spool.put(self._kind, records, data) else 0

    def resend(self, segment: Segment, probe: bool = False) -> tuple[bool, int]:
        """Post a spooled request again (one attempt: a ``probe``): whether the collector
        answered (the segment is done with: taken, or refused for good, counted), and its
        records not delivered."""
        delivery = self._deliver(segment.payload, probe)
        self.taken = delivery.taken
        if not delivery.taken:
            if delivery.later:
                return False, 0  # stays in the spool
            self._count(delivery.reason or "not taken", segment.records)
            return True, segment.records
        rejected = min(delivery.rejected, segment.records)
        if rejected:
            message = f": {delivery.message}" if delivery.message else ""
            self._count(f"rejected by the collector{message}", rejected)
        self.delivered += segment.records - rejected
        return True, rejected

    def close(self) -> None:
        self._poster.close()


def direct_sender(exporter: Any, kind: str) -> DirectSender | None:
    """A sender of checked ``kind`` ("spans" or "logs") records, or of metric points
    ("metrics", encoded as the exporter encodes them), as ``exporter`` would send them, if
    ``exporter`` is exactly the OTLP/HTTP or OTLP/gRPC exporter whose configuration this
    module knows; else None (the exporter gets SDK objects)."""
    if exporter is None or kind not in _EXPORTERS:
        return None
    if os.environ.get(_INTERNAL_METRICS, "").strip().lower() == "true":
        return None  # the exporter's own metrics count only what its export() sends
    module, name = _EXPORTERS[kind]
    if type(exporter).__qualname__ != name:
        return None  # another exporter: its export() may do more
    poster: Post | None = None
    max_request_size: object = 0  # the gRPC exporter sets no bound of its own
    if type(exporter).__module__ == f"{_HTTP}.{module}":
        poster = otlp_http_output.poster_like_client(getattr(exporter, "_client", None), kind)
        max_request_size = getattr(exporter, "_max_request_size", _DEFAULT_MAX_REQUEST_SIZE)
    elif type(exporter).__module__ == f"{_GRPC}.{module}":
        from opentelemetry_exporter_userevents.reader.outputs.exporters import (  # noqa: PLC0415
            otlp_grpc_post,  # grpcio, the grpc extra's: imported for this exporter only
        )

        poster = otlp_grpc_post.poster_like_exporter(exporter, kind)
    if poster is None or type(max_request_size) is not int:
        return None  # a subclass, or configured beyond what this module knows
    if kind == "metrics" and getattr(exporter, "_max_export_batch_size", 0) is not None:
        poster.close()
        return None  # the exporter splits its requests (or may): its export() does
    encode: Encode = _metrics_request
    if kind == "spans":
        encode = otlp_proto_direct.spans_request
    elif kind == "logs":
        encode = otlp_proto_direct.logs_request
    return DirectSender(poster, max_request_size, encode, kind)


def _metrics_request(
    points: Sequence[MetricPoint], cache: otlp_proto_direct.RequestCache
) -> tuple[bytes | None, int]:
    """The exporter's own encoding of the points' MetricsData (its ``export`` makes the
    same request); ``cache`` is not used."""
    from opentelemetry.exporter.otlp.proto.common.metrics_encoder import (  # noqa: PLC0415
        encode_metrics,  # the reader extra's; imported when metric points are posted
    )

    return encode_metrics(metrics_data(list(points))).SerializeToString(), 0
