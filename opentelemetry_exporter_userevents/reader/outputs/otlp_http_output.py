# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``--exporter otlp_proto_http`` without SDK objects: the request bytes
:mod:`.otlp_proto_direct` makes straight from checked records, the bytes the exporter would
have made of the SDK objects, posted by :mod:`.otlp_http_post` (a total deadline per
request, retries within it, a capped answer) where the exporter's client bounds only each
receive and reads any answer whole. Metric points are posted the same way, in the request
the exporter's own encoder makes of them (``encode_metrics``), unless the exporter splits
its requests (``_max_export_batch_size``).

The exporter is the one its entry point builds (``OTLPSpanExporter``, ``OTLPLogExporter``
of opentelemetry-exporter-otlp-proto-http), configured as always by its environment
variables; the request is made as its client makes it: the client's endpoint
(``/v1/traces``, ``/v1/logs``), headers (the user's, content type, user agent),
compression and timeout (``_client._endpoint``, ``_headers``, ``_compression``,
``_timeout``), the certificates its transport is given (``OTEL_EXPORTER_OTLP_*CERTIFICATE``,
``*CLIENT_KEY``), and its size limit (``_max_request_size``: a larger request is dropped and
logged, as the exporter drops it). These private names are checked by
``tests/test_sdk_private_names.py`` on the oldest and the newest exporter the package is
tested with; where one is missing (another version, a subclass, a third-party exporter of
the same name), or the exporter would go through what this module does not do (a
credential provider's session, a proxy), the output hands SDK objects to the exporter's
``export`` as before (on the output's thread: it cannot block reading, but it may retry
per receive).

What differs from the exporter's ``export``: a span or log the encoder cannot carry (a name
with a lone surrogate, a log body integer beyond 64 bits) is left out and counted, where
the exporter would fail its whole batch; and the exporter's own metrics
(``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED``) would not see these requests, so with them
enabled the SDK objects path is taken.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint, metrics_data
from opentelemetry_exporter_userevents.reader.outputs import otlp_proto_direct
from opentelemetry_exporter_userevents.reader.outputs.health_metrics import Durations, error_type
from opentelemetry_exporter_userevents.reader.outputs.otlp_http_post import Delivery, Poster
from opentelemetry_exporter_userevents.reader.outputs.spool import Segment, Spool

_logger = logging.getLogger(__name__)

_EXPORTERS = {
    "spans": ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "OTLPSpanExporter"),
    "logs": ("opentelemetry.exporter.otlp.proto.http._log_exporter", "OTLPLogExporter"),
    "metrics": ("opentelemetry.exporter.otlp.proto.http.metric_exporter", "OTLPMetricExporter"),
}
_DEFAULT_MAX_REQUEST_SIZE = 64 * 1024 * 1024
_INTERNAL_METRICS = "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"
_SIGNAL = {"spans": "TRACES", "logs": "LOGS", "metrics": "METRICS"}

MAX_REASONS = 8
"""Distinct reasons a sender counts its failed records by, and the summary names (a
collector's messages vary); past this many, records count under :data:`OTHER_REASONS`."""
OTHER_REASONS = "other reasons"

Encode = Callable[[Sequence[Any], otlp_proto_direct.RequestCache], tuple[bytes | None, int]]


class DirectSender:
    """Posts the requests of checked records (or of metric points) as an OTLP/HTTP
    exporter's client would."""

    def __init__(self, poster: Poster, max_request_size: int, encode: Encode, kind: str) -> None:
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
        self.taken = False
        """Whether the last request was taken (the collector answers: drain the spool)."""
        self.in_flight: tuple[bytes, int] | None = None
        """The request being posted and its records (spooled at stop if still there)."""
        self.delivered = 0
        """Records the collector took (less those its ``partial_success`` rejected)."""
        self.durations = Durations()
        """Each POST's duration, its retries included, by ``error.type`` when not taken."""

    def _deliver(self, data: bytes) -> Delivery:
        started = time.monotonic()
        delivery = self._poster.deliver(data)
        failed = "" if delivery.taken else error_type(delivery.reason or "not taken")
        self.durations.record(time.monotonic() - started, failed)
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

    def resend(self, segment: Segment) -> tuple[bool, int]:
        """Post a spooled request again: whether the collector answered (the segment is
        done with: taken, or refused for good, counted), and its records not delivered."""
        delivery = self._deliver(segment.payload)
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
    ("metrics", encoded as the exporter encodes them), as ``exporter``'s client would send
    them, if ``exporter`` is exactly the OTLP/HTTP exporter whose client this module knows;
    else None (the exporter gets SDK objects)."""
    if exporter is None or kind not in _EXPORTERS:
        return None
    if os.environ.get(_INTERNAL_METRICS, "").strip().lower() == "true":
        return None  # the exporter's own metrics count only what its export() sends
    module, name = _EXPORTERS[kind]
    if type(exporter).__module__ != module or type(exporter).__qualname__ != name:
        return None  # a subclass or another exporter: its export() may do more
    poster = _poster_like_client(getattr(exporter, "_client", None), kind)
    if poster is None:
        return None
    max_request_size = getattr(exporter, "_max_request_size", _DEFAULT_MAX_REQUEST_SIZE)
    if type(max_request_size) is not int:
        return None
    if kind == "metrics" and getattr(exporter, "_max_export_batch_size", 0) is not None:
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


def _poster_like_client(client: Any, kind: str) -> Poster | None:
    """A poster of what ``client`` would post, where it is configured as this module knows
    and sends nothing through what the poster does not do; else None."""
    endpoint = getattr(client, "_endpoint", None)
    headers = getattr(client, "_headers", None)
    timeout = getattr(client, "_timeout", None)
    compression = getattr(getattr(client, "_compression", None), "value", None)
    if not (
        type(endpoint) is str
        and type(headers) is dict
        and all(type(k) is str and type(v) is str for k, v in headers.items())
        and isinstance(timeout, int | float)
        and compression in ("none", "gzip", "deflate")
    ):
        return None
    signal = _SIGNAL[kind]
    for name in (
        "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
        f"OTEL_PYTHON_EXPORTER_OTLP_HTTP_{signal}_CREDENTIAL_PROVIDER",
    ):
        if os.environ.get(name):
            return None  # a session of the provider's making: the exporter's client posts
    try:
        poster = Poster(endpoint, headers, float(timeout), compression, kind)
    except ValueError:
        return None
    if urllib.request.getproxies() and not urllib.request.proxy_bypass(poster.host):
        return None  # requests would go through the proxy; the poster does not
    if poster.https:
        poster.ssl_context = _ssl_context(signal)
    return poster


def _setting(signal: str, name: str) -> str | None:
    return (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_{name}")
        or os.environ.get(f"OTEL_EXPORTER_OTLP_{name}")
        or None
    )


def _ssl_context(signal: str) -> ssl.SSLContext:
    """The certificates the exporter's transport is given: its CA file (else the bundle
    requests uses), and a client certificate and key for mTLS."""
    cafile = _setting(signal, "CERTIFICATE")
    if cafile is None:
        cafile = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if cafile is None:
        try:
            import certifi  # noqa: PLC0415 - requests' bundle, installed with it

            cafile = certifi.where()
        except ImportError:
            cafile = None
    context = ssl.create_default_context(cafile=cafile)
    certificate = _setting(signal, "CLIENT_CERTIFICATE")
    if certificate is not None:
        context.load_cert_chain(certificate, _setting(signal, "CLIENT_KEY"))
    return context
