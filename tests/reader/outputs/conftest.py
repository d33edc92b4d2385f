# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``collector``: local collectors the OTLP/HTTP output's tests start, each closed after
its test, with the exporter's environment pointed at the last one started."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest

from tests.support.raw_collector import RawServer


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []
    monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", raising=False)
    for name in ("ENDPOINT", "HEADERS", "COMPRESSION", "TIMEOUT"):
        for signal in ("", "TRACES_", "LOGS_"):
            monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{signal}{name}", raising=False)

    def start(answer: Callable[[socket.socket, int], None], timeout: float = 1) -> RawServer:
        server = RawServer(answer)
        servers.append(server)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", str(timeout))
        return server

    yield start
    for server in servers:
        server.close()
