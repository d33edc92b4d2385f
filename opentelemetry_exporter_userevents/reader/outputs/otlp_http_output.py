# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``--exporter otlp_proto_http`` without SDK objects: the OTLP/HTTP exporter's own HTTP
client posts the request bytes :mod:`.otlp_proto_direct` makes straight from checked
records, the bytes the exporter would have made of the SDK objects.

The exporter is the one its entry point builds (``OTLPSpanExporter``, ``OTLPLogExporter``
of opentelemetry-exporter-otlp-proto-http), configured as always by its environment
variables: endpoint (``/v1/traces``, ``/v1/logs``), headers, compression, timeout,
certificates, credential provider. Only the encoding is replaced: the request goes through
its client (``_client.export(serialized_data)``, what its ``export`` calls after encoding;
no public method takes bytes), with its retries (429, 502, 503, 504 and connection errors,
exponential backoff with jitter, ``Retry-After``, within the timeout), its compression and
headers, and its size limit (``_max_request_size``: a larger request is dropped and logged,
as the exporter drops it). These private names are checked by
``tests/test_sdk_private_names.py`` on the oldest and the newest exporter the package is
tested with; where one is missing (another version, a subclass, a third-party exporter of
the same name) the output hands SDK objects to the exporter's ``export`` as before.

What differs from the exporter's ``export``: a span or log the encoder cannot carry (a name
with a lone surrogate, a log body integer beyond 64 bits) is left out and counted, where
the exporter would fail its whole batch; and the exporter's own metrics
(``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED``) would not see these requests, so with them
enabled the SDK objects path is taken.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry_exporter_userevents.reader.join.rebuild import JoinedRecord
from opentelemetry_exporter_userevents.reader.outputs import otlp_proto_direct

_logger = logging.getLogger(__name__)

_EXPORTERS = {
    "spans": ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "OTLPSpanExporter"),
    "logs": ("opentelemetry.exporter.otlp.proto.http._log_exporter", "OTLPLogExporter"),
}
_DEFAULT_MAX_REQUEST_SIZE = 64 * 1024 * 1024
_INTERNAL_METRICS = "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"

Encode = Callable[
    [Sequence[JoinedRecord], otlp_proto_direct.RequestCache], tuple[bytes | None, int]
]


class DirectSender:
    """Posts the requests of checked records through an OTLP/HTTP exporter's client."""

    def __init__(self, client: Any, max_request_size: int, encode: Encode, kind: str) -> None:
        self._client = client
        self._max_request_size = max_request_size
        self._encode = encode
        self._kind = kind
        self._cache = otlp_proto_direct.RequestCache()

    def send(self, records: Sequence[JoinedRecord]) -> int:
        """Post one request of ``records``; how many were not delivered (never raises)."""
        try:
            data, failed = self._encode(records, self._cache)
        except Exception:  # noqa: BLE001 - a checked value the encoding still refused
            _logger.exception("Failed to encode %s batch", self._kind)
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
            return len(records)
        try:
            result = self._client.export(data)
        except Exception:  # noqa: BLE001 - the client catches its own; count, keep reading
            _logger.exception("Failed to export %s batch", self._kind)
            return len(records)
        if getattr(result, "success", False) is not True:
            return len(records)  # the client logged why
        return failed


def direct_sender(exporter: Any, kind: str) -> DirectSender | None:
    """A sender of checked ``kind`` ("spans" or "logs") records through ``exporter``'s
    client, if ``exporter`` is exactly the OTLP/HTTP exporter whose client this module
    knows; else None (the exporter gets SDK objects)."""
    if exporter is None or kind not in _EXPORTERS:
        return None
    if os.environ.get(_INTERNAL_METRICS, "").strip().lower() == "true":
        return None  # the exporter's own metrics count only what its export() sends
    module, name = _EXPORTERS[kind]
    if type(exporter).__module__ != module or type(exporter).__qualname__ != name:
        return None  # a subclass or another exporter: its export() may do more
    client = getattr(exporter, "_client", None)
    if not callable(getattr(client, "export", None)):
        return None
    max_request_size = getattr(exporter, "_max_request_size", _DEFAULT_MAX_REQUEST_SIZE)
    if type(max_request_size) is not int:
        return None
    encode = otlp_proto_direct.spans_request if kind == "spans" else otlp_proto_direct.logs_request
    return DirectSender(client, max_request_size, encode, kind)
