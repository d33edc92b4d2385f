# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Without ``--spool``, an outage longer than the exporter's own retries (4 to 6 attempts
within its timeout: 6 of a service's 196 records were lost in 48 s) loses nothing: the
request is retried as the Collector's ``retry_on_failure`` retries it, while the apps'
batches wait in the bounded memory queue."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import (  # noqa: E402
    RetryOnFailure,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import _records  # noqa: E402
from tests.support.raw_collector import RawServer  # noqa: E402

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
OUTAGE = 3.0
"""Seconds the collector gives no answer: three times the exporter's timeout (1 s here),
within which its own retries end."""


def test_an_outage_longer_than_the_exporters_retries_loses_nothing(
    collector: Callable[..., RawServer],
) -> None:
    up = threading.Event()
    taken: list[int] = []

    def answer(connection: socket.socket, request: int) -> None:
        if not up.is_set():
            connection.shutdown(socket.SHUT_RDWR)  # no answer: as a collector that is down
            return
        taken.append(request)
        server.send(connection, OK)

    server = collector(answer, timeout=1)
    retry = RetryOnFailure(initial_interval=0.2, max_interval=0.5, max_elapsed_time=60)
    stage = OutputStage(ExporterOutput("otlp_proto_http", retry=retry), stop_timeout=60)
    started = time.monotonic()
    batches = 0
    while time.monotonic() - started < OUTAGE:  # the apps keep writing through it
        stage.write(_records())
        batches += 1
        time.sleep(0.1)
    up.set()
    stage.write(_records())
    batches += 1
    stage.close()
    assert stage.failed == 0 and not stage.dropped and not stage.not_delivered
    assert stage.delivered["spans"][0] == 2 * batches
    assert stage.delivered["logs"][0] == 2 * batches
    assert len(taken) == 2 * batches  # each request taken once
