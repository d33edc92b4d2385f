# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Every record the read loop hands to the output is in exactly one bucket: delivered,
failed (by reason; a ``partial_success`` rejection among them), dropped (by stage and
reason), spooled, or not delivered at stop. A batch half sent at the stop (its spans taken,
its logs stuck) counts its spans as delivered and only its logs as not delivered (it
counted the whole batch as not delivered, and the spans as exported too)."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceResponse,
)

from opentelemetry_exporter_userevents.reader.outputs import health_metrics  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Spool  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import _records  # noqa: E402
from tests.support.raw_collector import RawServer  # noqa: E402

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


def _buckets(stage: OutputStage) -> Counter[str]:
    """Records by bucket, as the stage and its output count them."""
    buckets: Counter[str] = Counter()
    for taken, _failed, _durations in stage.delivered.values():
        buckets["delivered"] += taken
    buckets["failed"] = stage.failed
    buckets["dropped"] = sum(sum(kinds.values()) for kinds in stage.dropped.values())
    buckets["not delivered"] = sum(stage.not_delivered.values())
    spool = getattr(stage.output, "spool", None)
    if spool is not None:
        buckets["spooled"] = sum(spool.spooled.values())
    return +buckets


def _half_sending_collector(collector: Callable[..., RawServer]) -> threading.Event:
    """Takes the first request (the spans), never answers the next (the logs)."""
    stuck = threading.Event()
    box: list[RawServer] = []

    def answer(connection: socket.socket, request: int) -> None:
        if request == 1:
            box[0].send(connection, OK)
        else:
            stuck.wait(120)

    box.append(collector(answer, timeout=600))
    return stuck


@pytest.mark.parametrize("spool", [False, True], ids=["no spool", "spool"])
def test_a_batch_half_sent_at_the_stop_is_counted_once_per_record(
    collector: Callable[..., RawServer], tmp_path: Path, spool: bool
) -> None:
    stuck = _half_sending_collector(collector)
    output = ExporterOutput("otlp_proto_http")
    if spool:
        output.use_spool(Spool(str(tmp_path / "spool"), 1 << 20))
    stage = OutputStage(output, stop_timeout=60)
    stage.write(_records())  # 2 spans (taken), then 2 logs (stuck)
    deadline = time.monotonic() + 60
    while output.progress[1]["spans"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stage.stop_by(time.monotonic() + 0.5)
    stage.close()
    stuck.set()
    assert stage.delivered["spans"][0] == 2
    if spool:
        assert not stage.not_delivered and stage.spooled_at_stop == {"logs": 2}
        assert _buckets(stage) == {"delivered": 2, "spooled": 2}
    else:
        assert stage.not_delivered == {"logs": 2}
        assert _buckets(stage) == {"delivered": 2, "not delivered": 2}
        assert "2 logs not delivered: stop timeout" in stage.parts()
    reader = SimpleNamespace(
        decoder=SimpleNamespace(stats=SimpleNamespace(records=4, undecodable=0)), lost=0
    )
    join_stage = SimpleNamespace(stats=SimpleNamespace(invalid_reasons={}))
    health = health_metrics.gather(reader, join_stage, stage, 0)
    assert health.exported.get("span") == 2
    assert [d for d in health.dropped if d[1] == "stop timeout"] == (
        [] if spool else [("output", "stop timeout", "log", 2)]
    )


def test_a_partial_success_splits_a_request_between_delivered_and_failed(
    collector: Callable[..., RawServer],
) -> None:
    def partly(connection: socket.socket, request: int) -> None:
        if request == 1:
            spans = ExportTraceServiceResponse()
            spans.partial_success.rejected_spans = 1
            server.send(
                connection,
                b"HTTP/1.1 200 OK\r\nContent-Length: "
                + str(spans.ByteSize()).encode()
                + b"\r\n\r\n"
                + spans.SerializeToString(),
            )
        else:
            server.send(connection, OK)

    server = collector(partly, timeout=5)
    stage = OutputStage(ExporterOutput("otlp_proto_http"), stop_timeout=60)
    stage.write(_records())
    stage.close()
    assert _buckets(stage) == {"delivered": 3, "failed": 1}
