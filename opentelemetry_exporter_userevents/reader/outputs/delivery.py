# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What became of one OTLP request, and the retries that decide it, shared by the OTLP/HTTP
poster (:mod:`.otlp_http_post`) and the OTLP/gRPC one (:mod:`.otlp_grpc_post`).

A poster makes one attempt at a time (:data:`Attempt`): the attempt ends the request (a
:class:`Delivery`: taken, or refused for good), or may be retried, after the backoff the
OTLP specification asks for (exponential, 1, 2, 4... s, with jitter, as the exporters'
clients make it) or the delay the collector asked for (HTTP ``Retry-After``, gRPC
``RetryInfo``). :func:`deliver` makes the attempts within the request's total deadline, at
most :data:`MAX_ATTEMPTS`; a request still not taken after them may be taken later
(``Delivery.later``: a spool keeps it).

A taken request's ``Export*ServiceResponse`` may hold a ``partial_success``: the records
the collector rejected and why (:func:`partial_success`), counted by the sender.
"""

from __future__ import annotations

import logging
import random
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


def deliver(
    attempt: Attempt,
    timeout: float,
    kind: str,
    sleep: Callable[[float], None] = time.sleep,
    attempts: int = MAX_ATTEMPTS,
) -> Delivery:
    """Attempts until one ends the request, ``attempts`` are made, or the next would start
    past the deadline (``timeout`` s from now); what became of the request. A request not
    taken after the retries may be taken later (``later``)."""
    deadline = time.monotonic() + timeout
    attempts = max(1, min(attempts, MAX_ATTEMPTS))
    for number in range(attempts):
        result = attempt(deadline)
        if isinstance(result, Delivery):
            return result
        backoff = 2**number * random.uniform(1 - JITTER, 1 + JITTER)
        if result.retry_after is not None:
            backoff = result.retry_after
        if number + 1 == attempts or backoff > deadline - time.monotonic():
            _logger.error(
                "Failed to export %s batch due to timeout or max retries (last: %s).",
                kind,
                result.logged,
            )
            return Delivery(False, f"{result.failure} after {number + 1} attempts", later=True)
        _logger.warning(
            "Transient error %s encountered while exporting %s batch, retrying in %.2fs.",
            result.logged,
            kind,
            backoff,
        )
        sleep(backoff)
    return Delivery(False, "not sent")  # not reached: the last attempt returns


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
