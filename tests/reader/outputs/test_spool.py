# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``--spool``: requests the collector did not take wait on disk, private and bounded, are
re-sent oldest first when it takes requests again (and by the next reader of the same
directory); what the bound drops is counted; a damaged or hostile segment is deleted and
counted, never read past its bound, never a crash."""

from __future__ import annotations

import os
import socket
import stat
import struct
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper import output_stage  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import (  # noqa: E402
    HEADER,
    MAGIC,
    MAX_SEGMENT,
    Spool,
    SpoolError,
)
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import _records  # noqa: E402
from tests.support.kernel_support import wait_until  # noqa: E402
from tests.support.raw_collector import RawServer  # noqa: E402

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
UNAVAILABLE = b"HTTP/1.1 503 Unavailable\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n"


def _segment_files(directory: Path) -> list[Path]:
    """The segments in a spool: in its readers' namespaces, and in DIR itself (legacy)."""
    return sorted(directory.glob("*.seg")) + sorted(directory.glob("*/*.seg"))


def _segment(kind: int, records: int, payload: bytes) -> bytes:
    return HEADER.pack(MAGIC, 1, kind, 0, records, len(payload), zlib.crc32(payload)) + payload


def test_segments_are_private_resumed_oldest_first_and_removed_when_taken(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        spool = Spool(str(tmp_path / "spool"), 1 << 20)
        assert spool.put("spans", 2, b"first") and spool.put("logs", 3, b"second")
    finally:
        os.umask(old)
    directory = tmp_path / "spool"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    (namespace,) = directory.iterdir()  # this reader's own, locked
    assert stat.S_IMODE(namespace.stat().st_mode) == 0o700
    files = sorted(namespace.iterdir())
    assert len(files) == 3 and {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}
    spool.close()

    again = Spool(str(directory), 1 << 20)  # the next reader of the same directory
    first = again.oldest()
    assert first is not None and (first.kind, first.records, first.payload) == (
        "spans",
        2,
        b"first",
    )
    again.remove(first, 2)
    second = again.oldest()
    assert second is not None and second.payload == b"second" and second.kind == "logs"
    again.remove(second, 3)
    assert again.oldest() is None and _segment_files(directory) == []
    assert again.resent == {"spans": 2, "logs": 3} and again.counts() == (0, 0)
    again.close()
    assert list(directory.iterdir()) == []  # the emptied namespaces removed


def test_the_bound_drops_the_oldest_first_and_counts_them(tmp_path: Path) -> None:
    size = HEADER.size + 100
    spool = Spool(str(tmp_path / "spool"), 3 * size)
    for n in range(5):
        assert spool.put("spans", 10 + n, bytes([n]) * 100)
    assert spool.counts() == (3, 3 * size)
    assert spool.dropped == {"spans": 10 + 11}  # the two oldest
    oldest = spool.oldest()
    assert oldest is not None and oldest.records == 12
    assert not spool.put("logs", 7, b"x" * (3 * size))  # larger than the spool alone
    assert spool.dropped["logs"] == 7 and spool.counts() == (3, 3 * size)


def test_a_spool_not_owned_or_not_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(SpoolError, match="not a directory"):
        Spool(str(tmp_path / "link"), 1 << 20)
    if os.geteuid() == 0:
        (tmp_path / "theirs").mkdir()
        os.chown(tmp_path / "theirs", 12345, 12345)
        with pytest.raises(SpoolError, match="owned by uid 12345"):
            Spool(str(tmp_path / "theirs"), 1 << 20)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.builds(
            lambda kind, records, payload, cut, flip: _damage(
                _segment(kind, records, payload), cut, flip
            ),
            st.integers(0, 5),
            st.integers(0, 2**32 - 1),
            st.binary(max_size=64),
            st.integers(0, 200),
            st.integers(-1, 200),
        ),
    )
)
def test_a_damaged_or_hostile_segment_is_skipped_and_counted(tmp_path: Path, data: bytes) -> None:
    directory = tmp_path / f"fuzz-{zlib.crc32(data)}-{len(data)}"
    directory.mkdir(mode=0o700, exist_ok=True)
    for entry in directory.iterdir():
        entry.unlink()
    (directory / f"{1:016d}.seg").write_bytes(data)
    good = _segment(1, 1, b"good")
    (directory / f"{2:016d}.seg").write_bytes(good)
    spool = Spool(str(directory), 1 << 20)
    first = spool.oldest()
    assert first is not None
    if first.number == 1:  # the fuzzed bytes were a whole segment: read as they say
        kind, records, payload = struct.unpack_from("<B", data, 9)[0], first.records, first.payload
        assert kind in (1, 2, 3) and data == _segment(kind, records, payload)
        spool.remove(first, 0)
        first = spool.oldest()
        assert first is not None
    else:
        assert spool.damaged == 1 and not (directory / f"{1:016d}.seg").exists()
    assert first.number == 2 and first.payload == b"good"
    spool.close()


def _damage(segment: bytes, cut: int, flip: int) -> bytes:
    data = segment[: len(segment) - cut] if cut else segment
    if 0 <= flip < len(data):
        data = data[:flip] + bytes([data[flip] ^ 0x41]) + data[flip + 1 :]
    return data


def test_a_huge_a_linked_or_a_special_segment_is_not_read(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    directory.mkdir(mode=0o700)
    huge = directory / f"{1:016d}.seg"
    with huge.open("wb") as file:
        file.truncate(MAX_SEGMENT + 1)  # sparse: costs nothing, would cost 64 MiB to read
    secret = tmp_path / "secret"
    secret.write_bytes(_segment(1, 1, b"not yours"))
    (directory / f"{2:016d}.seg").symlink_to(secret)
    os.mkfifo(directory / f"{3:016d}.seg")  # would block a reader that opened it plainly
    (directory / f"{4:016d}.seg").write_bytes(_segment(2, 1, b"mine"))
    (directory / "notes.txt").write_text("left alone")
    spool = Spool(str(directory), 1 << 30)
    first = spool.oldest()
    assert first is not None and first.payload == b"mine"
    assert spool.damaged == 3 and secret.exists() and (directory / "notes.txt").exists()


def _stage(directory: Path, server: RawServer) -> tuple[OutputStage, Spool]:
    output = ExporterOutput("otlp_proto_http")
    spool = Spool(str(directory), 1 << 20)
    output.use_spool(spool)
    return OutputStage(output, stop_timeout=60), spool


def test_what_the_collector_did_not_take_is_spooled_then_resent_when_it_answers(
    collector: Callable[..., RawServer], tmp_path: Path
) -> None:
    down = {"yes": True}

    def maybe(connection: socket.socket, request: int) -> None:
        server.send(connection, UNAVAILABLE if down["yes"] else OK)

    server = collector(maybe, timeout=30)
    stage, spool = _stage(tmp_path / "spool", server)
    stage.write(_records())
    stage.close()
    assert stage.failed == 0 and spool.counts()[0] == 2  # a spans and a logs request
    assert "2 spans and 2 logs spooled (the collector did not take them in time)" in stage.parts()
    assert "2 requests (0.0 MiB) left in the spool: 2 spans and 2 logs" in stage.parts()
    assert spool.left() == {"spans": 2, "logs": 2}
    spool.close()

    down["yes"] = False  # the collector is back; a new reader with the same spool
    requests_before = server.requests
    stage, spool = _stage(tmp_path / "spool", server)
    stage.write(_records())
    stage.close()
    assert stage.failed == 0 and spool.counts() == (0, 0)
    assert server.requests == requests_before + 4  # 2 new requests, then the 2 spooled
    assert "2 spans and 2 logs re-sent from the spool" in stage.parts()


def test_a_spooled_request_is_resent_while_nothing_else_is_written(
    collector: Callable[..., RawServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(output_stage, "IDLE_SECONDS", 0.05)
    directory = tmp_path / "spool"
    before = Spool(str(directory), 1 << 20)  # a reader before, that exited
    before.put("spans", 1, ExportTraceServiceRequest().SerializeToString())
    before.close()
    server = collector(lambda connection, request: server.send(connection, OK), timeout=30)
    stage, spool = _stage(directory, server)
    assert wait_until(lambda: spool.counts() == (0, 0), 60)
    stage.close()
    assert server.requests == 1 and spool.resent == {"spans": 1}


def test_a_request_the_collector_refuses_for_good_is_not_spooled(
    collector: Callable[..., RawServer], tmp_path: Path
) -> None:
    server = collector(
        lambda connection, request: server.send(
            connection, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
        ),
        timeout=30,
    )
    stage, spool = _stage(tmp_path / "spool", server)
    stage.write(_records())
    stage.close()
    assert stage.failed == 4 and spool.counts() == (0, 0) and not spool.spooled


def test_the_spool_needs_the_otlp_http_senders(tmp_path: Path) -> None:
    output = ExporterOutput("console")
    with pytest.raises(ValueError, match="--exporter otlp_proto_http"):
        output.use_spool(Spool(str(tmp_path / "spool"), 1 << 20))


def test_what_is_not_delivered_at_the_stop_deadline_is_spooled_for_the_next_reader(
    collector: Callable[..., RawServer], tmp_path: Path
) -> None:
    """A collector that reads each request and never answers: at the stop deadline the
    request in flight and the batches queued go to the spool, not to 'not delivered'."""
    stuck = threading.Event()

    def never(connection: socket.socket, request: int) -> None:
        stuck.wait(120)

    server = collector(never, timeout=600)
    stage, spool = _stage(tmp_path / "spool", server)
    for _ in range(3):
        stage.write(_records())
    assert wait_until(lambda: server.requests >= 1, 60)
    stage.stop_by(time.monotonic() + 0.5)
    stage.close()
    stuck.set()
    assert not stage.not_delivered
    assert spool.spooled == {"spans": 6, "logs": 6} and spool.counts()[0] == 6
    assert "6 spans and 6 logs spooled (the collector did not take them in time)" in stage.parts()


def test_a_segment_that_cannot_be_written_is_counted_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = Spool(str(tmp_path / "spool"), 1 << 20)
    real_write = os.write

    def full(fd: int, data: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    assert not spool.put("logs", 5, b"payload")
    monkeypatch.setattr(os, "write", real_write)
    assert spool.unwritten == {"logs": 5} and spool.counts() == (0, 0)
    assert _segment_files(tmp_path / "spool") == []
    assert list((tmp_path / "spool").rglob("*.tmp")) == []  # no temporary file left
    assert spool.put("logs", 1, b"next")  # and the spool goes on


def test_a_spool_of_many_tiny_segments_is_held_to_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry_exporter_userevents.reader.outputs.exporterhelper import (  # noqa: PLC0415
        spool as spool_module,
    )

    monkeypatch.setattr(spool_module, "MAX_SEGMENTS", 8)
    directory = tmp_path / "spool"
    directory.mkdir(mode=0o700)
    for n in range(1, 41):  # a hostile directory: 40 segments of one record each
        (directory / f"{n:016d}.seg").write_bytes(_segment(1, 1, b""))
    spool = Spool(str(directory), 1 << 30)
    assert spool.counts()[0] == 8 and spool.dropped == {"spans": 32}
    oldest = spool.oldest()
    assert oldest is not None and oldest.number == 33  # the oldest went first
    assert spool.put("logs", 1, b"x") and spool.counts()[0] == 8
    assert len(_segment_files(directory)) == 8
