# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""One OTLP/gRPC request (``--exporter otlp_proto_grpc``) within a total deadline, retried as
the OTLP specification says, for a :class:`.direct_sender.DirectSender`.

The request bytes go as they are (a unary call whose request and answer are not
serialized here: they are the ``Export*ServiceRequest`` the sender made, and the
``Export*ServiceResponse``) on a channel made as the exporter makes its own: the
exporter's target, credentials (``OTEL_EXPORTER_OTLP_*CERTIFICATE``, ``*CLIENT_KEY``, a
credential provider), channel options, compression (``OTEL_EXPORTER_OTLP_COMPRESSION=gzip``)
and timeout, and its headers as metadata (:func:`poster_like_exporter` reads them from the
exporter's private ``_endpoint``, ``_insecure``, ``_credentials``, ``_channel_options``,
``_compression``, ``_headers``, ``_timeout`` and ``_retryable_error_codes``, checked by
``tests/test_sdk_private_names.py``). gRPC bounds each call by its deadline (what is left of
the request's, so a collector that never answers costs the timeout, not more) and each
answer by :data:`MAX_RESPONSE` bytes.

**Retries** (``Failures`` in the OTLP specification): ``CANCELLED``,
``DEADLINE_EXCEEDED``, ``ABORTED``, ``OUT_OF_RANGE``, ``UNAVAILABLE`` and ``DATA_LOSS`` are
retried with the exponential backoff and jitter of :mod:`.delivery`; ``RESOURCE_EXHAUSTED``
only when the collector says that recovery is possible with a ``google.rpc.RetryInfo`` in
the status details (where the exporter's own ``export`` retries it always). A
``RetryInfo``'s delay (in ``grpc-status-details-bin``, or the ``google.rpc.retryinfo-bin``
trailer the exporter reads) replaces the backoff. Other codes are not retried: the
request's records are counted as not delivered (``gRPC INVALID_ARGUMENT: message``), not
spooled. With ``OTEL_PYTHON_EXPORTER_OTLP_GRPC_RETRYABLE_ERROR_CODES`` set, the codes it
names are retried instead (``RESOURCE_EXHAUSTED`` then without ``RetryInfo``). A request
still not taken after the retries, or at its deadline, may be taken later (a spool keeps
it). ``UNAVAILABLE`` closes the channel and the next attempt opens a new one, as the
exporter does: a channel's own reconnection backoff (up to two minutes) would keep
failing calls at once after the collector is back.

An OK answer is parsed for its ``partial_success`` (:func:`.delivery.partial_success`).
:meth:`GrpcPoster.deliver` never raises: what the client raises is a failure, counted.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc  # type: ignore[import-untyped]

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import (
    DEADLINE,
    Delivery,
    Retry,
    RetryOnFailure,
    Throttle,
    deliver,
    partial_success,
    printable,
)

_logger = logging.getLogger(__name__)

_METHODS = {
    "spans": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    "metrics": "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
}
MAX_RESPONSE = 4 * 1024 * 1024
"""Bytes of an answer at most (gRPC's default, made explicit): a larger one fails the call
(``RESOURCE_EXHAUSTED``, from the client)."""
RETRYABLE = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
"""Codes the specification lists as retryable (``RESOURCE_EXHAUSTED`` with ``RetryInfo``
only), the exporter's default set."""
DEADLINE_SLACK = 0.05
"""A ``DEADLINE_EXCEEDED`` with less than this left of the request's deadline is the
request's own deadline (not retried: it passed)."""
_STATUS_DETAILS = "grpc-status-details-bin"
_RETRY_INFO_TRAILER = "google.rpc.retryinfo-bin"
_RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo"


class GrpcPoster:
    """Sends request bytes of one signal to one OTLP/gRPC endpoint."""

    def __init__(
        self,
        target: str,
        credentials: Any,
        options: Sequence[tuple[str, Any]],
        compression: Any,
        headers: Sequence[tuple[str, str]],
        timeout: float,
        kind: str,
        retryable: frozenset[Any] = RETRYABLE,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``credentials``: the channel's (``grpc.ChannelCredentials``), None for an
        insecure channel; ``compression``: a ``grpc.Compression``."""
        if kind not in _METHODS:
            raise ValueError(f"unknown signal {kind!r}")
        self.target = target
        self.credentials = credentials
        self.options = list(options)
        if not any(name == "grpc.max_receive_message_length" for name, _value in options):
            self.options.append(("grpc.max_receive_message_length", MAX_RESPONSE))
        self.compression = compression
        self.headers = tuple(headers)
        self.timeout = timeout
        self.kind = kind
        self.retryable = retryable
        self.sleep = sleep
        self.retry: RetryOnFailure | None = None
        """The Collector's ``retry_on_failure`` (``timeout`` then bounds each attempt); None:
        the exporter's retries (``timeout`` bounds the request)."""
        self.throttle: Throttle | None = None
        """Shared with the output's other senders: no attempt before the collector said."""
        self._channel: Any = None
        self._call: Any = None

    def deliver(self, data: bytes, attempts: int | None = None) -> Delivery:
        """Send ``data`` (compressed by the channel) until it is taken, ``attempts`` are
        made, or the deadline; what became of it. Never raises; failures are logged as the
        exporter logs them."""
        try:
            return deliver(
                lambda at: self._try(data, at), self.timeout, self.kind, self.sleep, attempts,
                self.retry, self.throttle,
            )  # fmt: skip
        except Exception as error:  # noqa: BLE001 - a client that fails us: counted, not raised
            _logger.exception("Failed to export %s batch", self.kind)
            return Delivery(False, f"gRPC client error ({type(error).__name__})")

    def _try(self, data: bytes, deadline: float) -> Delivery | Retry:
        """One call: the request's end (OK, or a code not retried), or a retry."""
        left = deadline - time.monotonic()
        if left <= 0:
            return Delivery(False, DEADLINE, later=True)
        try:
            answer = self._unary()(data, timeout=left, metadata=self.headers)
        except grpc.RpcError as error:
            return self._failed(error, deadline)
        return partial_success(self.kind, answer if type(answer) is bytes else b"")

    def _failed(self, error: Any, deadline: float) -> Delivery | Retry:
        code = _call_value(error, "code") or grpc.StatusCode.UNKNOWN
        name = getattr(code, "name", str(code))
        details = printable(str(_call_value(error, "details") or ""))
        retry_after = retry_delay(_call_value(error, "trailing_metadata"))
        if code == grpc.StatusCode.UNAVAILABLE:
            self.close()  # a new channel for the next attempt: connect at once
        if code == grpc.StatusCode.DEADLINE_EXCEEDED and deadline - time.monotonic() < (
            DEADLINE_SLACK
        ):
            if self.retry is not None:
                return Retry(DEADLINE, DEADLINE)  # the attempt's timeout: retried
            _logger.error("Failed to export %s batch: %s", self.kind, DEADLINE)
            return Delivery(False, DEADLINE, later=True)
        retryable = code in self.retryable
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED and self.retryable == RETRYABLE:
            retryable = retry_after is not None  # recovery possible: the collector says so
        if not retryable:
            _logger.error(
                "Failed to export %s batch code: %s, reason: %s", self.kind, name, details
            )
            return Delivery(False, f"gRPC {name}: {details}" if details else f"gRPC {name}")
        return Retry(f"gRPC {name}", name, retry_after)

    def _unary(self) -> Any:
        """The channel's unary call of this signal's ``Export``, bytes in and out (made
        at the first attempt, and again after ``UNAVAILABLE``)."""
        if self._call is None:
            if self.credentials is None:
                channel = grpc.insecure_channel(
                    self.target, options=self.options, compression=self.compression
                )
            else:
                channel = grpc.secure_channel(
                    self.target,
                    self.credentials,
                    options=self.options,
                    compression=self.compression,
                )
            self._channel = channel
            self._call = channel.unary_unary(_METHODS[self.kind])
        return self._call

    def close(self) -> None:
        channel, self._channel, self._call = self._channel, None, None
        if channel is not None:
            try:
                channel.close()
            except Exception:  # noqa: BLE001 - closing what failed; nothing is lost
                pass


def _call_value(error: Any, name: str) -> Any:
    """A failed call's ``code()``, ``details()`` or ``trailing_metadata()``; None where the
    error has none (a bare ``RpcError``)."""
    method = getattr(error, name, None)
    if not callable(method):
        return None
    try:
        return method()
    except Exception:  # noqa: BLE001 - an error without it
        return None


def retry_delay(metadata: Any) -> float | None:
    """The delay a ``google.rpc.RetryInfo`` asks for (seconds), from a failed call's
    trailing metadata (the status details, or the ``google.rpc.retryinfo-bin`` trailer);
    None if there is none, or it is not one."""
    from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]  # noqa: PLC0415

    info = None
    try:
        for key, value in metadata or ():
            if key == _RETRY_INFO_TRAILER and type(value) is bytes:
                info = error_details_pb2.RetryInfo.FromString(value)
            elif key == _STATUS_DETAILS and type(value) is bytes:
                for detail in status_pb2.Status.FromString(value).details:
                    if detail.type_url == _RETRY_INFO_TYPE:
                        info = error_details_pb2.RetryInfo.FromString(detail.value)
    except Exception:  # noqa: BLE001 - details that are not a Status: no delay asked for
        return None
    if info is None or not info.HasField("retry_delay"):
        return None
    delay = info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return max(float(delay), 0.0) if math.isfinite(delay) else None


def poster_like_exporter(exporter: Any, kind: str) -> GrpcPoster | None:
    """A poster of what the OTLP/gRPC ``exporter`` would send, where it is configured as
    this module knows; else None (the exporter's ``export`` gets SDK objects)."""
    target = getattr(exporter, "_endpoint", None)
    insecure = getattr(exporter, "_insecure", None)
    credentials = getattr(exporter, "_credentials", None)
    options = getattr(exporter, "_channel_options", None)
    compression = getattr(exporter, "_compression", None)
    headers = getattr(exporter, "_headers", None)
    timeout = getattr(exporter, "_timeout", None)
    retryable = getattr(exporter, "_retryable_error_codes", None)
    if not (
        type(target) is str
        and type(insecure) is bool
        and (insecure or isinstance(credentials, grpc.ChannelCredentials))
        and isinstance(options, tuple | list)
        and all(type(o) is tuple and len(o) == 2 and type(o[0]) is str for o in options)
        and isinstance(compression, grpc.Compression)
        and isinstance(headers, tuple | list)
        and all(
            type(h) is tuple and len(h) == 2 and all(type(v) is str for v in h) for h in headers
        )
        and isinstance(timeout, int | float)
        and isinstance(retryable, frozenset)
        and all(isinstance(code, grpc.StatusCode) for code in retryable)
    ):
        return None
    return GrpcPoster(
        target,
        None if insecure else credentials,
        options,
        compression,
        headers,
        float(timeout),
        kind,
        RETRYABLE if retryable == RETRYABLE else retryable,
    )
