# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""One OTLP/HTTP request that can neither hang nor balloon: a total deadline (connect, send,
every byte of the answer, and the retries between), and a cap on the answer's body.

The exporter's own client bounds each receive, not the request: a collector that dribbles
its answer a byte at a time keeps it for as long as it likes, and it reads a whole error
body into memory, however large. Here a watchdog cuts the connection at the deadline (a
blocked receive returns at once), and at most :data:`MAX_RESPONSE_BODY` bytes of an answer
are read (past that the connection is closed, unread). Retries are the exporter's: 429,
502, 503, 504 and connection errors, exponential backoff with jitter, ``Retry-After``
honoured, none past the deadline; other answers are not retried. One connection is kept
for the next request when its answer was read whole. The name lookup (``getaddrinfo``)
cannot be cut: the resolver's own timeouts bound it.

As the OTLP specification says ("OTLP/HTTP Response"): only a 2xx answer is a success (a
redirect is not followed, and is a failure); a 2xx answer's ``partial_success`` (the
``Export*ServiceResponse`` of the signal, read from the capped body) names the records the
collector rejected (``rejected_spans``, ``rejected_log_records``, ``rejected_data_points``)
and why (``error_message``); a 4xx other than 429 is not retried, and the ``message`` of
its ``google.rpc.Status`` body says why. :meth:`Poster.deliver` returns all of it, for the
output to count by reason.
"""

from __future__ import annotations

import gzip
import http.client
import logging
import math
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import NamedTuple
from urllib.parse import urlsplit

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

MAX_RESPONSE_BODY = 64 * 1024
"""Bytes of an answer's body read at most (OTLP answers are small: a partial success or an
error message); a larger one is not read and its connection is closed."""
RETRYABLE = frozenset({429, 502, 503, 504})
"""Answers retried, as the exporter's client retries them."""


class Answer(NamedTuple):
    status: int | None
    """None: no answer (``error`` says why)."""
    reason: str
    retry_after: float | None
    error: str | None
    body: bytes = b""
    """The answer's body, if it was read whole (at most :data:`MAX_RESPONSE_BODY` bytes)."""


class Poster:
    """Posts request bytes to one OTLP/HTTP endpoint (``http`` or ``https``)."""

    def __init__(
        self,
        endpoint: str,
        headers: Mapping[str, str],
        timeout: float,
        compression: str,
        kind: str,
        ssl_context: ssl.SSLContext | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http or https endpoint: {endpoint!r}")
        if compression not in ("none", "gzip", "deflate"):
            raise ValueError(f"unknown compression {compression!r}")
        self.host = parts.hostname
        self.port = parts.port
        self.https = parts.scheme == "https"
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.headers = dict(headers)
        if compression != "none" and not any(k.lower() == "content-encoding" for k in headers):
            self.headers["Content-Encoding"] = compression
        self.timeout = timeout
        self.compression = compression
        self.kind = kind
        self.ssl_context = ssl_context
        self.sleep = sleep
        self.retry: RetryOnFailure | None = None
        """The Collector's ``retry_on_failure`` (``timeout`` then bounds each attempt); None:
        the exporter's client's retries (``timeout`` bounds the request)."""
        self.throttle: Throttle | None = None
        """Shared with the output's other senders: no attempt before the collector said."""
        self._connection: http.client.HTTPConnection | None = None

    def post(self, data: bytes) -> bool:
        """Post ``data`` until it is taken or the deadline; whether it was taken."""
        return self.deliver(data).taken

    def deliver(self, data: bytes, attempts: int | None = None) -> Delivery:
        """Post ``data`` (compressed here) until it is taken, ``attempts`` are made, or the
        deadline; what became of it. Never raises; failures are logged as the exporter's
        client logs them."""
        if self.compression == "gzip":
            data = gzip.compress(data)
        elif self.compression == "deflate":
            data = zlib.compress(data)
        return deliver(
            lambda deadline: self._try(data, deadline), self.timeout, self.kind, self.sleep,
            attempts, self.retry, self.throttle,
        )  # fmt: skip

    def _try(self, data: bytes, deadline: float) -> Delivery | Retry:
        """One attempt: the request's end (a 2xx, or an answer not retried), or a retry."""
        answer = self._attempt(data, deadline)
        if answer.status is not None and 200 <= answer.status < 300:
            return partial_success(self.kind, answer.body)
        if answer.reason == DEADLINE and answer.status is None and self.retry is not None:
            return Retry(DEADLINE, DEADLINE)  # the attempt's timeout: retry_on_failure retries
        retryable = answer.status in RETRYABLE if answer.status else answer.error is not None
        if not retryable:
            _logger.error(
                "Failed to export %s batch code: %s, reason: %s",
                self.kind,
                answer.status,
                answer.reason or answer.error or "unknown",
            )
            return Delivery(False, _refused(answer), later=answer.reason == DEADLINE)
        failure = f"HTTP {answer.status}" if answer.status else _no_answer(answer.error)
        return Retry(failure, answer.status or answer.error, answer.retry_after)

    def _attempt(self, data: bytes, deadline: float) -> Answer:
        """One request (again at once on a new connection, if a kept one was stale)."""
        reused = self._connection is not None
        answer = self._request(data, deadline)
        if reused and answer.error is not None and time.monotonic() < deadline:
            answer = self._request(data, deadline)
        return answer

    def _request(self, data: bytes, deadline: float) -> Answer:
        left = deadline - time.monotonic()
        if left <= 0:
            return Answer(None, DEADLINE, None, None)  # no time: not retried
        connection = self._connection or self._connect(left)
        self._connection = None
        if connection.sock is not None:
            connection.sock.settimeout(left)  # a kept connection: this request's time
        cut = threading.Event()
        watchdog = threading.Timer(left, _cut, (connection, cut))
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.request("POST", self.path, data, self.headers)
            response = connection.getresponse()
            status, reason = response.status, response.reason
            retry_after = _retry_after(response.getheader("Retry-After"))
            length = response.getheader("Content-Length")
            whole = not (
                length is not None and length.isdigit() and int(length) > MAX_RESPONSE_BODY
            )
            body = b""
            if whole:
                body = response.read(MAX_RESPONSE_BODY + 1)
                whole = len(body) <= MAX_RESPONSE_BODY
            if cut.is_set():  # an answer cut short may look whole: it is not one
                connection.close()
                return Answer(None, DEADLINE, None, None)
            if whole and not response.will_close:
                self._connection = connection  # read whole: the next request may use it
            else:
                connection.close()
            return Answer(status, reason, retry_after, None, body if whole else b"")
        except Exception as error:  # noqa: BLE001 - anything the peer did: no answer
            connection.close()
            if cut.is_set():
                return Answer(None, DEADLINE, None, None)  # not retried
            return Answer(None, "", None, f"{type(error).__name__}: {error}")
        finally:
            watchdog.cancel()

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self.ssl_context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _cut(connection: http.client.HTTPConnection, cut: threading.Event) -> None:
    """The deadline: shut the connection's socket down, so that a receive blocked in it
    returns (the plain socket's shutdown, also under TLS)."""
    cut.set()
    sock = connection.sock
    if sock is not None:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


def _refused(answer: Answer) -> str:
    """Why an answer that is not retried was not a success: its status, and the message of
    its ``google.rpc.Status`` body if it has one."""
    if answer.status is None:
        return _no_answer(answer.error) if answer.error else answer.reason or "no answer"
    reason = f"HTTP {answer.status} {printable(answer.reason)}".rstrip()
    if 300 <= answer.status < 400:
        return reason + " (redirects are not followed)"
    message = ""
    if answer.body:
        try:
            from google.rpc import status_pb2  # type: ignore[import-untyped]  # noqa: PLC0415

            message = printable(status_pb2.Status.FromString(answer.body).message)
        except Exception:  # noqa: BLE001 - not a Status: the status line says enough
            message = ""
    return f"{reason}: {message}" if message else reason


def _no_answer(error: str | None) -> str:
    """A connection error by its kind (``ConnectionRefusedError``), not its varying text."""
    return "no answer (" + (error or "unknown").split(":", 1)[0] + ")"


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds (delay-seconds or an HTTP date), None if absent or not
    understood."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            at = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if at.tzinfo is None:
            at = at.replace(tzinfo=timezone.utc)
        return max(at.timestamp() - time.time(), 0.0)
    return max(seconds, 0.0) if math.isfinite(seconds) else None
