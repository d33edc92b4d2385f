# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the OTLP specification asks of a client's answers ("OTLP/HTTP Response"), against
a local collector: only 2xx is a success; a 2xx answer's ``partial_success`` rejections are
counted as not written, with the collector's message; a 4xx other than 429 is not retried
and its ``google.rpc.Status`` message says why; retries that run out say their last answer.
Each reason is in the summary's parts, printable and bounded in length and in number."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from google.rpc import status_pb2  # noqa: E402
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: E402
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceResponse,
)

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import MAX_MESSAGE  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporters.direct_sender import (  # noqa: E402
    MAX_REASONS,
    OTHER_REASONS,
)
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import _records  # noqa: E402
from tests.support.raw_collector import RawServer  # noqa: E402


def _answer(status: str, body: bytes = b"", more: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/x-protobuf\r\n{more}"
    return head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def _stage_writes(batches: int = 1) -> OutputStage:
    stage = OutputStage(ExporterOutput("otlp_proto_http"), stop_timeout=60)
    for _ in range(batches):
        stage.write(_records())  # 2 spans, then 2 logs: a request each, in that order
    stage.close()
    return stage


def test_partial_success_rejections_are_counted_with_the_collectors_message(
    collector: Callable[..., RawServer],
) -> None:
    def partly(connection: socket.socket, request: int) -> None:
        if request == 1:
            spans = ExportTraceServiceResponse()
            spans.partial_success.rejected_spans = 1
            spans.partial_success.error_message = "span too old"
            server.send(connection, _answer("200 OK", spans.SerializeToString()))
        else:
            logs = ExportLogsServiceResponse()
            logs.partial_success.rejected_log_records = 2
            logs.partial_success.error_message = "log\x1b[31m bad\u202e"
            server.send(connection, _answer("200 OK", logs.SerializeToString()))

    server = collector(partly, timeout=5)
    stage = _stage_writes()
    assert server.requests == 2  # a partial success is not retried
    assert stage.failed == 3 and stage.written == {"spans": 2, "logs": 2}
    parts = stage.parts()
    assert "1 not written: rejected by the collector: span too old" in parts
    assert "2 not written: rejected by the collector: log?[31m bad?" in parts  # printable


def test_a_400_is_not_retried_and_its_status_message_is_the_reason(
    collector: Callable[..., RawServer],
) -> None:
    def bad(connection: socket.socket, request: int) -> None:
        body = status_pb2.Status(code=3, message="x" * 10_000).SerializeToString()
        server.send(connection, _answer("400 Bad Request", body))

    server = collector(bad, timeout=5)
    stage = _stage_writes()
    assert server.requests == 2 and stage.failed == 4
    reason = "HTTP 400 Bad Request: " + "x" * MAX_MESSAGE + "..."  # cut
    assert stage.parts() == [f"4 not written: {reason}"]


def test_a_redirect_is_not_a_success(collector: Callable[..., RawServer]) -> None:
    def moved(connection: socket.socket, request: int) -> None:
        server.send(connection, _answer("307 Temporary Redirect", more="Location: /x\r\n"))

    server = collector(moved, timeout=5)
    stage = _stage_writes()
    assert server.requests == 2 and stage.failed == 4
    reason = "HTTP 307 Temporary Redirect (redirects are not followed)"
    assert stage.parts() == [f"4 not written: {reason}"]


def test_retries_that_run_out_say_their_last_answer(collector: Callable[..., RawServer]) -> None:
    def unavailable(connection: socket.socket, request: int) -> None:
        server.send(connection, _answer("503 Unavailable", more="Retry-After: 0\r\n"))

    server = collector(unavailable, timeout=30)
    stage = _stage_writes()
    assert server.requests == 12 and stage.failed == 4  # 6 attempts per request
    assert stage.parts() == ["4 not written: HTTP 503 after 6 attempts"]


def test_a_collectors_varying_messages_are_counted_under_a_bounded_number_of_reasons(
    collector: Callable[..., RawServer],
) -> None:
    def varying(connection: socket.socket, request: int) -> None:
        body = status_pb2.Status(message=f"bad request number {request}").SerializeToString()
        server.send(connection, _answer("400 Bad Request", body))

    batches = 2 * MAX_REASONS
    server = collector(varying, timeout=5)
    stage = _stage_writes(batches)
    assert server.requests == 2 * batches and stage.failed == 4 * batches
    counts = {p.split(" not written: ")[1]: int(p.split()[0]) for p in stage.parts()}
    assert len(counts) <= MAX_REASONS + 1 and OTHER_REASONS in counts  # bounded, not lost
    assert sum(counts.values()) == 4 * batches
