# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``--exporter otlp_proto_http`` without SDK objects: where the requests a
:class:`.direct_sender.DirectSender` makes go, read from the exporter's client, for
:mod:`.otlp_http_post` (a total deadline per request, retries within it, a capped answer)
where the exporter's client bounds only each receive and reads any answer whole.

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
"""

from __future__ import annotations

import os
import ssl
import urllib.request
from typing import Any

from opentelemetry_exporter_userevents.reader.outputs.exporters.otlp_http_post import Poster

_SIGNAL = {"spans": "TRACES", "logs": "LOGS", "metrics": "METRICS"}


def poster_like_client(client: Any, kind: str) -> Poster | None:
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
