# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A reader with a spool, during an outage: once a request was not taken after its
retries, the next ones are spooled at once, not posted (each would spend its deadline in
retries while the apps' records pile up and the output's queue drops them); the collector
is probed with one attempt, less and less often; the first request it takes reopens the
way and the spool drains, yielding to batches that wait."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper import (  # noqa: E402
    collector_gate,
    output_stage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.collector_gate import (  # noqa: E402
    CollectorGate,
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
UNAVAILABLE = b"HTTP/1.1 503 Unavailable\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n"


def test_the_gate_probes_after_a_growing_interval_and_reopens() -> None:
    now = [100.0]
    gate = CollectorGate(clock=lambda: now[0])
    assert not gate.down and not gate.probe_due()
    gate.mark_down()
    assert gate.down and not gate.probe_due() and gate.outages == 1
    now[0] += collector_gate.FIRST_PROBE
    assert gate.probe_due()
    waits = []
    for _ in range(8):  # each failed probe: twice as long, up to the bound
        gate.mark_down()
        start = now[0]
        while not gate.probe_due():
            now[0] += 0.25
        waits.append(now[0] - start)
    assert waits[0] == 2 * collector_gate.FIRST_PROBE
    assert waits == sorted(waits) and waits[-1] == collector_gate.MAX_PROBE
    assert gate.outages == 1
    gate.mark_up()
    assert not gate.down and not gate.probe_due()
    gate.mark_down()
    assert gate.outages == 2


def _stage(directory: Path) -> tuple[OutputStage, ExporterOutput, Spool]:
    output = ExporterOutput("otlp_proto_http")
    spool = Spool(str(directory), 1 << 24)
    output.use_spool(spool)
    return OutputStage(output, stop_timeout=60), output, spool


def test_an_outage_spools_at_once_probes_then_drains_everything(
    collector: Callable[..., RawServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collector_gate, "FIRST_PROBE", 0.3)
    monkeypatch.setattr(output_stage, "IDLE_SECONDS", 0.05)
    down = {"yes": True}

    def maybe(connection: socket.socket, request: int) -> None:
        server.send(connection, UNAVAILABLE if down["yes"] else OK)

    server = collector(maybe, timeout=30)
    stage, output, spool = _stage(tmp_path / "spool")
    stage.write(_records())  # spans: 6 attempts, then spooled; logs: spooled at once
    assert wait_until(lambda: spool.counts()[0] == 2, 60)
    assert server.requests == 6 and output.gate.down
    for _ in range(10):  # the outage goes on while the apps write
        stage.write(_records())
    assert wait_until(lambda: spool.counts()[0] == 22, 60), spool.counts()
    assert server.requests <= 6 + 3  # probes only: one attempt each, the interval growing
    down["yes"] = False  # back: the next probe (on an idle output) takes it all
    assert wait_until(lambda: spool.counts() == (0, 0), 60), spool.counts()
    stage.close()
    assert stage.failed == 0 and not output.gate.down
    assert spool.resent == {"spans": 22, "logs": 22}
    assert not any("dropped" in part for part in stage.parts()), stage.parts()


def test_the_spool_drains_while_no_batch_waits(
    collector: Callable[..., RawServer], tmp_path: Path
) -> None:
    directory = tmp_path / "spool"
    left = Spool(str(directory), 1 << 20)
    for _ in range(3):  # left by a reader before
        left.put("spans", 1, ExportTraceServiceRequest().SerializeToString())
    left.close()
    server = collector(lambda connection, request: server.send(connection, OK), timeout=30)
    output = ExporterOutput("otlp_proto_http")
    spool = Spool(str(directory), 1 << 20)
    output.use_spool(spool)
    output.backlog = lambda: 5  # batches wait: one segment, then the batches
    output.idle()
    assert server.requests == 1 and spool.counts()[0] == 2
    output.backlog = lambda: 0
    output.idle()
    assert server.requests == 3 and spool.counts() == (0, 0)
    output.close()


def test_a_collector_marked_down_with_nothing_spooled_is_asked_again(
    collector: Callable[..., RawServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spool could not keep the requests (a full disk): no segment to probe with, so the
    next request is posted, not spooled for ever."""
    server = collector(lambda connection, request: server.send(connection, OK), timeout=30)
    output = ExporterOutput("otlp_proto_http")
    spool = Spool(str(tmp_path / "spool"), 1 << 20)
    output.use_spool(spool)
    monkeypatch.setattr(collector_gate, "FIRST_PROBE", 0.0)  # the probe is due at once
    output.gate.mark_down()
    output.idle()
    assert not output.gate.down
    output.write(_records())
    assert server.requests == 2 and spool.counts() == (0, 0)  # spans and logs, posted
    output.close()
