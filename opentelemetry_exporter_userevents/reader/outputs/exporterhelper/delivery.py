# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What became of one OTLP request, and the retries that decide it (the Collector's retry
sender), shared by the OTLP/HTTP poster (:mod:`..exporters.otlp_http_post`) and the
OTLP/gRPC one (:mod:`..exporters.otlp_grpc_post`).

A poster makes one attempt at a time (:data:`Attempt`): the attempt ends the request (a
:class:`Delivery`: taken, or refused for good), or may be retried. :func:`deliver` retries
in one of two ways. With a :class:`RetryOnFailure` (``record``'s default, the Collector's
``retry_on_failure``): each attempt has the exporter's timeout, the backoff starts at 5 s
and grows by 1.5 up to 30 s, for up to 300 s from the first attempt. Without (``decode``,
and a reader with ``--spool``, whose spool is the queue that retries): as the exporters'
clients retry, 1, 2, 4... s with jitter, at most :data:`MAX_ATTEMPTS` within one total
deadline. Either way a delay the collector asked for (HTTP ``Retry-After``, gRPC
``RetryInfo``) is held by a :class:`Throttle` the output's senders share: no attempt of any
signal goes before it (at most :data:`MAX_RETRY_AFTER` s). A request still not taken may be
taken later (``Delivery.later``: a spool keeps it).

A taken request's ``Export*ServiceResponse`` may hold a ``partial_success``: the records
the collector rejected and why (:func:`partial_success`), counted by the sender.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

_logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
"""Attempts per request, as the exporters' clients make."""
JITTER = 0.2
"""Each backoff (1, 2, 4... s) is multiplied by a random factor within 1 ± this."""
MAX_MESSAGE = 120
"""Characters of a collector's message kept (a reason in the summary); the rest is cut and
what cannot be printed is replaced."""
DEADLINE = "the request's deadline passed"


class Delivery(NamedTuple):
    """What became of one request."""

    taken: bool
    """The collector took the request (less ``rejected``)."""
    reason: str | None = None
    """Why it was not taken (an answer, or none after the retries), for the summary."""
    rejected: int = 0
    """Taken, but this many records rejected (``partial_success``)."""
    message: str = ""
    """The partial success's ``error_message`` (printable, at most :data:`MAX_MESSAGE`)."""
    later: bool = False
    """Not taken, but the collector may take it later: no answer, or a retryable one, after
    the retries; or the deadline (a spool keeps such requests)."""


class Retry(NamedTuple):
    """An attempt that may be retried."""

    failure: str
    """What went wrong, as the summary names it (``HTTP 503``, ``gRPC UNAVAILABLE``, ``no
    answer (ConnectionRefusedError)``)."""
    logged: object
    """What went wrong, as the log says it (a status, a code, an error)."""
    retry_after: float | None = None
    """The delay the collector asked for (seconds), if it did."""


Attempt = Callable[[float], "Delivery | Retry"]
"""One attempt at a request, given its deadline (monotonic): its end, or a retry."""


class RetryOnFailure(NamedTuple):
    """The Collector's ``retry_on_failure`` (exporterhelper), its defaults: a request not
    taken (no answer, a retryable answer, an attempt past its timeout) is tried again after
    a backoff that starts at ``initial_interval``, grows by ``multiplier`` up to
    ``max_interval`` (each randomized by ``randomization_factor``), until
    ``max_elapsed_time`` has passed since its first attempt; a throttle (``Retry-After``,
    ``RetryInfo``) makes the backoff at least that long. ``enabled`` False: one attempt."""

    enabled: bool = True
    initial_interval: float = 5.0
    max_interval: float = 30.0
    multiplier: float = 1.5
    max_elapsed_time: float = 300.0
    """0: no bound (retried until taken, or the stop)."""
    randomization_factor: float = 0.5


MAX_RETRY_AFTER = 300.0
"""Seconds of a ``Retry-After`` or ``RetryInfo`` delay honoured at most (the Collector's
``max_elapsed_time``): a larger one (an absurd date, a typo) is cut to this, and a warning
says so."""


class Throttle:
    """When the collector may be asked again, as it said (``Retry-After``, ``RetryInfo``):
    shared by the senders of one output (one collector), so that no request, retry or probe
    of any signal goes before then: a throttled collector never gets a burst. Thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._until = 0.0
        self.capped = 0
        """Delays asked for that were longer than :data:`MAX_RETRY_AFTER`, cut to it."""

    def hold(self, seconds: float) -> float:
        """The collector asked for ``seconds``: held until then (at most
        :data:`MAX_RETRY_AFTER`); the delay held."""
        delay = min(max(seconds, 0.0), MAX_RETRY_AFTER)
        with self._lock:
            if seconds > MAX_RETRY_AFTER:
                self.capped += 1
            self._until = max(self._until, self._clock() + delay)
        if seconds > MAX_RETRY_AFTER:
            _logger.warning(
                "The collector asked to wait %.0f s; waiting %.0f s (the most honoured).",
                seconds,
                MAX_RETRY_AFTER,
            )
        return delay

    def left(self) -> float:
        """Seconds until the collector may be asked again (0: now)."""
        with self._lock:
            return max(0.0, self._until - self._clock())


def deliver(
    attempt: Attempt,
    timeout: float,
    kind: str,
    sleep: Callable[[float], None] = time.sleep,
    attempts: int | None = None,
    retry: RetryOnFailure | None = None,
    throttle: Throttle | None = None,
) -> Delivery:
    """Attempts until one ends the request; what became of it. A request not taken after
    the retries may be taken later (``later``). No attempt goes before the ``throttle``.

    With ``retry`` (the Collector's ``retry_on_failure``), ``timeout`` bounds each attempt,
    and attempts go on until ``retry.max_elapsed_time`` (or ``attempts`` are made: a
    probe's one). Without it, as the OTLP exporters' clients retry: ``timeout`` bounds the
    whole request, at most :data:`MAX_ATTEMPTS` attempts, backoff 1, 2, 4... s."""
    if retry is not None:
        return _retry_on_failure(attempt, timeout, kind, sleep, attempts, retry, throttle)
    deadline = time.monotonic() + timeout
    attempts = max(1, min(attempts or MAX_ATTEMPTS, MAX_ATTEMPTS))
    waited = False
    for number in range(attempts):
        wait = throttle.left() if throttle is not None and not waited else 0.0
        if wait > 0:
            if wait > deadline - time.monotonic():
                return Delivery(False, THROTTLED, later=True)
            sleep(wait)
        result = attempt(deadline)
        if isinstance(result, Delivery):
            return result
        backoff = 2**number * random.uniform(1 - JITTER, 1 + JITTER)
        if result.retry_after is not None:
            backoff = _held(result.retry_after, throttle)
        if number + 1 == attempts or backoff > deadline - time.monotonic():
            _logger.error(
                "Failed to export %s batch due to timeout or max retries (last: %s).",
                kind,
                result.logged,
            )
            return Delivery(False, f"{result.failure} after {number + 1} attempts", later=True)
        _back_off(result, kind, backoff, sleep)
        waited = True  # the throttle's delay, if it asked for one, is over
    return Delivery(False, "not sent")  # not reached: the last attempt returns


THROTTLED = "throttled by the collector (Retry-After) past the request's deadline"


def _back_off(result: Retry, kind: str, backoff: float, sleep: Callable[[float], None]) -> None:
    """Before the next attempt: say why (as the OTLP exporters say it), then wait."""
    _logger.warning(
        "Transient error %s encountered while exporting %s batch, retrying in %.2fs.",
        result.logged,
        kind,
        backoff,
    )
    sleep(backoff)


def _held(retry_after: float, throttle: Throttle | None) -> float:
    """The delay the collector asked for, held by the throttle (capped)."""
    if throttle is not None:
        return throttle.hold(retry_after)
    return min(max(retry_after, 0.0), MAX_RETRY_AFTER)


def _retry_on_failure(
    attempt: Attempt,
    timeout: float,
    kind: str,
    sleep: Callable[[float], None],
    attempts: int | None,
    retry: RetryOnFailure,
    throttle: Throttle | None,
) -> Delivery:
    """:func:`deliver` with the Collector's ``retry_on_failure``."""
    started = time.monotonic()
    budget = retry.max_elapsed_time if retry.max_elapsed_time > 0 else math.inf
    interval = retry.initial_interval
    number = 0
    waited = False
    while True:
        number += 1
        wait = throttle.left() if throttle is not None and not waited else 0.0
        if wait > 0:
            if time.monotonic() - started + wait > budget:
                return Delivery(False, THROTTLED_ELAPSED, later=True)
            sleep(wait)
        result = attempt(time.monotonic() + timeout)
        if isinstance(result, Delivery):
            if result.taken or not result.later:
                return result
            result = Retry(result.reason or DEADLINE, result.reason or DEADLINE)
        backoff = interval * random.uniform(
            1 - retry.randomization_factor, 1 + retry.randomization_factor
        )
        interval = min(interval * retry.multiplier, retry.max_interval)
        if result.retry_after is not None:
            backoff = max(backoff, _held(result.retry_after, throttle))
        if (
            not retry.enabled
            or (attempts is not None and number >= attempts)
            or time.monotonic() - started + backoff > budget
        ):
            if retry.enabled and attempts is None:
                _logger.error(
                    "Failed to export %s batch: no more retries left (last: %s).",
                    kind,
                    result.logged,
                )
            return Delivery(False, f"{result.failure} after {number} attempts", later=True)
        _back_off(result, kind, backoff, sleep)
        waited = True  # the throttle's delay, if it asked for one, is over


THROTTLED_ELAPSED = "throttled by the collector (Retry-After) past max_elapsed_time"


_REJECTED = {"spans": "rejected_spans", "logs": "rejected_log_records"}


def partial_success(kind: str, body: bytes) -> Delivery:
    """A request taken, whose answer is ``body`` (the signal's ``Export*ServiceResponse``):
    taken, less what its ``partial_success`` says was rejected. An answer that is not one
    is a success still."""
    if not body:
        return Delivery(True)
    try:
        response = response_type(kind).FromString(body)
    except Exception:  # noqa: BLE001 - not the signal's response: a success all the same
        return Delivery(True)
    partial = response.partial_success
    rejected = getattr(partial, _REJECTED.get(kind, "rejected_data_points"), 0)
    message = printable(partial.error_message)
    if rejected or message:
        _logger.warning("The collector rejected %d of a %s batch: %s", rejected, kind, message)
    return Delivery(True, None, max(int(rejected), 0), message)


def response_type(kind: str) -> Any:
    """The signal's ``Export*ServiceResponse`` (opentelemetry-proto, the reader extra's)."""
    if kind == "spans":
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: PLC0415

        return trace_service_pb2.ExportTraceServiceResponse
    if kind == "logs":
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2  # noqa: PLC0415

        return logs_service_pb2.ExportLogsServiceResponse
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2  # noqa: PLC0415

    return metrics_service_pb2.ExportMetricsServiceResponse


def printable(text: str) -> str:
    """A collector's text for the summary: at most :data:`MAX_MESSAGE` characters, each
    one the terminal prints as itself (controls and format characters replaced)."""
    text = text[: MAX_MESSAGE + 1]
    cut = len(text) > MAX_MESSAGE
    text = "".join(c if c.isprintable() else "?" for c in text[:MAX_MESSAGE])
    return text + "..." if cut else text
