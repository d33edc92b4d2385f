# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Throttling honoured, as the Collector's retry sender honours it: a 429/503 with
``Retry-After`` (seconds or an HTTP date) or a gRPC ``RetryInfo`` delays the request at
least that long, whatever the per-attempt timeout, with or without a spool; no request of
any signal goes to the collector before then (no burst); an absurd delay is capped, and a
warning says so. Against collectors on 127.0.0.1."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from email.utils import formatdate
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper import (  # noqa: E402
    delivery,
    output_stage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import (  # noqa: E402
    RetryOnFailure,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Spool  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import _records  # noqa: E402
from tests.support.kernel_support import wait_until  # noqa: E402
from tests.support.raw_collector import RawServer  # noqa: E402

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
QUICK = RetryOnFailure(initial_interval=0.01, max_interval=0.05, max_elapsed_time=60)
"""Backoffs too short to hide a throttle: any wait of a second or more is the collector's."""


def _throttled(retry_after: Callable[[int], str | None]) -> tuple[Callable[..., None], list[float]]:
    """An answer that says 429 with ``Retry-After: retry_after(request)`` (200 when it is
    None), and the times the requests arrived."""
    arrivals: list[float] = []

    def answer(server: RawServer, connection: socket.socket, request: int) -> None:
        arrivals.append(time.monotonic())
        value = retry_after(request)
        if value is None:
            server.send(connection, OK)
            return
        server.send(
            connection,
            b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: "
            + value.encode()
            + b"\r\nContent-Length: 0\r\n\r\n",
        )

    return answer, arrivals


def _start(collector: Callable[..., RawServer], answer: Callable[..., None]) -> RawServer:
    box: list[RawServer] = []
    server = collector(lambda connection, request: answer(box[0], connection, request), timeout=1)
    box.append(server)
    return server


def test_a_retry_after_longer_than_the_attempt_s_timeout_is_waited_for(
    collector: Callable[..., RawServer],
) -> None:
    """Each attempt has 1 s; the collector asks for 2 s: the request waits 2 s, then is
    taken (it gave up at once, its records lost)."""
    answer, arrivals = _throttled(lambda request: "2" if request == 1 else None)
    server = _start(collector, answer)
    output = ExporterOutput("otlp_proto_http", retry=QUICK)
    output.write(_records())
    output.close()
    assert output.failed == 0 and server.requests == 3  # spans twice, then logs
    assert arrivals[1] - arrivals[0] >= 2.0


def test_a_retry_after_as_an_http_date_is_waited_for(
    collector: Callable[..., RawServer],
) -> None:
    answer, arrivals = _throttled(
        lambda request: formatdate(time.time() + 3, usegmt=True) if request == 1 else None
    )
    _start(collector, answer)
    output = ExporterOutput("otlp_proto_http", retry=QUICK)
    output.write(_records())
    output.close()
    assert output.failed == 0 and arrivals[1] - arrivals[0] >= 2.0  # the date: to the second


def test_a_throttled_collector_gets_no_burst_and_loses_nothing_without_a_spool(
    collector: Callable[..., RawServer],
) -> None:
    """Five batches queued while the collector says 429, Retry-After: 1, three times: no
    request of any signal goes sooner than a second after a 429 (there were 10 requests in
    20 ms), and every record is delivered."""
    answer, arrivals = _throttled(lambda request: "1" if request <= 3 else None)
    _start(collector, answer)
    stage = OutputStage(ExporterOutput("otlp_proto_http", retry=QUICK), stop_timeout=60)
    for _ in range(5):
        stage.write(_records())
    stage.close()
    assert stage.failed == 0 and not stage.not_delivered
    assert stage.delivered["spans"][0] == 10 and stage.delivered["logs"][0] == 10
    assert len(arrivals) == 13  # 10 requests, 3 of them twice
    for first, second in zip(arrivals[:3], arrivals[1:4], strict=True):
        assert second - first >= 1.0


def test_an_absurd_retry_after_is_capped_and_said(
    collector: Callable[..., RawServer],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(delivery, "MAX_RETRY_AFTER", 1.0)
    answer, arrivals = _throttled(lambda request: "999999999" if request == 1 else None)
    _start(collector, answer)
    output = ExporterOutput("otlp_proto_http", retry=QUICK)
    stage = OutputStage(output, stop_timeout=60)
    with caplog.at_level(logging.WARNING):
        stage.write(_records())
        stage.close()
    assert stage.failed == 0 and arrivals[1] - arrivals[0] >= 1.0
    assert output.throttle.capped == 1
    assert "asked to wait 999999999 s; waiting 1 s (the most honoured)" in caplog.text
    assert "1 collector delays (Retry-After, RetryInfo) cut to 1 s" in stage.parts()


def test_with_a_spool_the_collector_is_not_probed_before_its_retry_after(
    collector: Callable[..., RawServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Retry-After longer than what retry_on_failure has left: the request is spooled,
    and the spool's probe waits for the collector's 3 s (it probed at 1, 2, 4 s)."""
    monkeypatch.setattr(output_stage, "IDLE_SECONDS", 0.05)
    answer, arrivals = _throttled(lambda request: "3" if request == 1 else None)
    _start(collector, answer)
    output = ExporterOutput(
        "otlp_proto_http", retry=RetryOnFailure(initial_interval=0.01, max_elapsed_time=0.5)
    )
    spool = Spool(str(tmp_path / "spool"), 1 << 20)
    output.use_spool(spool)
    stage = OutputStage(output, stop_timeout=60)
    stage.write(_records())
    assert wait_until(lambda: spool.resent == {"spans": 2, "logs": 2}, 60)
    stage.close()
    assert spool.counts() == (0, 0) and stage.failed == 0
    assert len(arrivals) == 3 and arrivals[1] - arrivals[0] >= 3.0


def test_a_grpc_retry_info_longer_than_the_attempt_s_timeout_is_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grpc = pytest.importorskip("grpc")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    from tests.reader.outputs.test_otlp_grpc_post import (  # noqa: PLC0415
        Collector,
        _clean_environment,
        fail,
    )

    _clean_environment(monkeypatch)
    server = Collector()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
        output = ExporterOutput("otlp_proto_grpc", retry=QUICK)
        sender = output._direct_spans
        assert sender is not None
        poster = sender._poster
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            threading.Event().wait(seconds)

        poster.sleep, poster.timeout = sleep, 0.5  # type: ignore[attr-defined]
        server.answers = [fail(grpc.StatusCode.RESOURCE_EXHAUSTED, "full", 1.5)]
        result = poster.deliver(b"request")
        output.close()
    finally:
        server.close()
    assert result.taken and len(server.calls) == 2 and slept and slept[0] >= 1.5
