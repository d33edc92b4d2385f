# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The delivery ledger: written = delivered + counted (by stage and reason) + left in the
spool, in one line (the summary's, ``status``'s, the health metrics'), checked to add up
through the cases where a record could fall between two counts: a batch half sent at the
stop, a ``partial_success``, the sending queue full, a spool full of an exited reader's
segments taken over. What does not add up is said, never hidden."""

from __future__ import annotations

import io
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceResponse,
)

from opentelemetry_exporter_userevents.reader.outputs import health_metrics as hm  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery_ledger import (  # noqa: E402
    SpoolCounts,
    StageCounts,
    ledger,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import (  # noqa: E402
    HEADER,
    Spool,
)
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.outputs.test_every_record_once import _half_sending_collector  # noqa: E402
from tests.reader.outputs.test_health_metrics import _CountingReader, _record  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import Receiver, _records, receiver  # noqa: E402, F401
from tests.reader.views.test_process_view import app_records  # noqa: E402
from tests.support.raw_collector import RawServer  # noqa: E402

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


@pytest.mark.parametrize("spool", [False, True], ids=["no spool", "spool"])
def test_a_batch_half_sent_at_the_stop_adds_up(
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
    stage.stop_by(time.monotonic() + 4)  # 1 s of it to spool what is left
    stage.close()
    stuck.set()
    book = stage.ledger()
    assert book.unaccounted == 0
    if spool:
        assert book.line() == "delivery: 4 written = 2 delivered + 2 left in the spool"
    else:
        assert book.line() == "delivery: 4 written = 2 delivered + 2 not delivered (stop timeout)"
    assert not any("queued for the output" in part for part in stage.parts())  # counted


def test_a_partial_success_adds_up(collector: Callable[..., RawServer]) -> None:
    def partly(connection: socket.socket, request: int) -> None:
        if request == 1:
            spans = ExportTraceServiceResponse()
            spans.partial_success.rejected_spans = 1
            body = spans.SerializeToString()
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            server.send(connection, head + body)
        else:
            server.send(connection, OK)

    server = collector(partly, timeout=5)
    stage = OutputStage(ExporterOutput("otlp_proto_http"), stop_timeout=60)
    stage.write(_records())
    stage.close()
    assert stage.ledger().line() == "delivery: 4 written = 3 delivered + 1 not written"


class _Held:
    """An output (a file's, no senders) whose first write waits until released."""

    def __init__(self) -> None:
        self.failed = 0
        self.release = threading.Event()
        self.writing = threading.Event()

    def write(self, items: Sequence[Any]) -> None:
        self.writing.set()
        self.release.wait(60)
        self.failed += 1  # one item of each batch refused, as a file's output might

    def close(self) -> None:
        pass


def test_a_full_queue_s_oldest_dropped_adds_up() -> None:
    output = _Held()
    stage = OutputStage(output, stop_timeout=60, max_batches=1)
    batch = _records()
    stage.write(batch)
    assert output.writing.wait(60)  # in flight
    running = stage.ledger()
    assert running.unaccounted == 0 and ("queued or in flight", 4) in running.buckets
    for _ in range(3):
        stage.write(batch)  # one waits; the two before it are dropped, oldest first
    output.release.set()
    stage.close()
    assert stage.ledger().line() == (
        "delivery: 16 written = 6 delivered + 2 not written "
        "+ 8 dropped (output: queue full (oldest dropped))"
    )


def test_an_exited_reader_s_spool_taken_over_and_partly_dropped_adds_up(
    collector: Callable[..., RawServer], tmp_path: Path
) -> None:
    server = collector(lambda connection, request: server.send(connection, OK), timeout=5)
    directory = str(tmp_path / "spool")
    exited = Spool(directory, 1 << 20)
    assert exited.put("spans", 3, b"s" * 100) and exited.put("logs", 2, b"l" * 100)
    exited.close()
    output = ExporterOutput("otlp_proto_http")
    output.use_spool(Spool(directory, HEADER.size + 150))  # room for one: the oldest dropped
    stage = OutputStage(output, stop_timeout=60)
    stage.write(_records())  # taken: the spool drains after it
    stage.close()
    book = stage.ledger()
    assert book.line() == (
        "delivery: 4 written + 5 taken over from exited readers' spools = 6 delivered "
        "+ 3 dropped (spool full: oldest first)"
    )


def test_what_does_not_add_up_is_said() -> None:
    short = ledger(StageCounts(10, 6, 1, {}, 0, 0, SpoolCounts(left=2)))
    assert short.unaccounted == 1
    assert short.line() == (
        "delivery: 10 written = 6 delivered + 1 not written + 2 left in the spool + 1 unaccounted"
    )
    twice = ledger(StageCounts(10, 9, 0, {"output: queue full": 2}, 0, 0, None))
    assert twice.line() == (
        "delivery: 10 written = 9 delivered + 2 dropped (output: queue full) "
        "- 1 unaccounted (counted twice)"
    )


def test_the_health_file_status_and_points_carry_the_ledger(
    collector: Callable[..., RawServer], tmp_path: Path
) -> None:
    server = collector(lambda connection, request: server.send(connection, OK), timeout=5)
    stage = OutputStage(ExporterOutput("otlp_proto_http"), stop_timeout=60)
    stage.write(_records())
    stage.close()
    reader = SimpleNamespace(
        decoder=SimpleNamespace(stats=SimpleNamespace(records=4, undecodable=0)), lost=0
    )
    join_stage = SimpleNamespace(stats=SimpleNamespace(invalid_reasons={}))
    health = hm.gather(reader, join_stage, stage, 0)
    hm.write_health_file(str(tmp_path), health)
    read = hm.read_health_file(str(tmp_path))
    assert read is not None and read.ledger == [("delivered", 4)] and read.written == 4
    assert "delivery: 4 written = 4 delivered" in hm.health_lines(read)
    points = {p.name: p.point.value for p in hm.health_points(read) if "items." in p.name}
    assert points["otel_userevents.reader.items.written"] == 4
    assert points["otel_userevents.reader.items.unaccounted"] == 0


def test_record_says_the_ledger_before_its_summary(
    monkeypatch: pytest.MonkeyPatch,
    receiver: Receiver,  # noqa: F811
) -> None:
    code, err, _took = _record(
        monkeypatch,
        ["--exporter", "otlp_proto_http", "--duration", "0.3", "--health-interval", "0"],
        _CountingReader(app_records(5001)),
    )
    lines = err.splitlines()
    assert code == 0, err
    assert lines[-2] == "otel-userevents: delivery: 4 written = 4 delivered", err
    assert "stopped (duration)" in lines[-1]


def test_status_of_a_file_of_the_version_before_has_no_ledger(tmp_path: Path) -> None:
    hm.write_health_file(str(tmp_path), hm.Health(read=3))
    out = io.StringIO()
    from opentelemetry_exporter_userevents.reader.commands.status import (  # noqa: PLC0415
        reader_health,
    )

    reader_health(str(tmp_path), out)
    assert "records: 3 read" in out.getvalue() and "delivery:" not in out.getvalue()


def test_from_the_stop_on_only_the_stopping_thread_changes_the_spool(tmp_path: Path) -> None:
    """The output's thread, still under way at the stop, must not change the counts the stop
    took: a request it spools would be there twice (the stop spooled it), a segment it
    removes would leave the spool without being counted delivered."""
    spool = Spool(str(tmp_path / "spool"), 1 << 20)
    assert spool.put("spans", 3, b"kept")
    kept = spool.oldest()
    assert kept is not None
    spool.hold_for(0)  # the stop
    assert not spool.put("spans", 2, b"late")  # the output's thread: refused, not counted
    spool.remove(kept, 3)  # taken after the stop: left, to be sent again
    assert spool.ledger_counts() == SpoolCounts(left=3) and spool.spooled == {"spans": 3}
    results: list[bool] = []

    def stop_spooling() -> None:  # the stop's own thread
        spool.hold_for(threading.get_ident())
        results.append(spool.put("logs", 1, b"at stop"))

    stopping = threading.Thread(target=stop_spooling)
    stopping.start()
    stopping.join(60)
    assert results == [True] and spool.ledger_counts() == SpoolCounts(left=4)
    spool.close()


def test_a_stop_with_a_request_in_flight_holds_the_spool_for_itself(
    collector: Callable[..., RawServer], tmp_path: Path
) -> None:
    """While the stop spools what was not delivered, a put from any other thread (the
    output's, whose request in flight failed meanwhile) is refused: the request would be
    spooled twice, and the ledger would count it twice."""
    stuck = _half_sending_collector(collector)
    output = ExporterOutput("otlp_proto_http")
    spool = Spool(str(tmp_path / "spool"), 1 << 20)
    output.use_spool(spool)
    late: list[bool] = []

    def the_output_s_thread_puts() -> None:
        other = threading.Thread(target=lambda: late.append(spool.put("logs", 2, b"late")))
        other.start()
        other.join(60)

    spool_in_flight = output.spool_in_flight

    def while_the_stop_spools() -> Counter[str]:
        the_output_s_thread_puts()
        return spool_in_flight()

    output.spool_in_flight = while_the_stop_spools  # type: ignore[method-assign]
    stage = OutputStage(output, stop_timeout=60)
    spool_left = stage._spool_left

    def before_the_stop_spools(batches: list[Any], deadline: float) -> Counter[str]:
        the_output_s_thread_puts()
        return spool_left(batches, deadline)

    stage._spool_left = before_the_stop_spools  # type: ignore[method-assign]
    stage.write(_records())  # 2 spans (taken), then 2 logs (stuck)
    deadline = time.monotonic() + 60
    while output.progress[1]["spans"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stage.stop_by(time.monotonic() + 4)  # 1 s of it to spool what is left
    stage.close()
    stuck.set()
    assert late == [False, False]
    assert stage.ledger().line() == "delivery: 4 written = 2 delivered + 2 left in the spool"
