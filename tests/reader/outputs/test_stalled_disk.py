# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A disk that stalls in ``fsync`` while the output spools (a hung NFS, a saturated device):
the read loop's calls (the output's ``write``, the progress line, the health snapshot)
return while the writer is still blocked, and the stop returns by its deadline, what it
could not spool counted as not delivered and never put in place afterwards."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry_exporter_userevents.reader.outputs import health_metrics  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Spool  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import _records  # noqa: E402
from tests.support.raw_collector import RawServer  # noqa: E402

UNAVAILABLE = b"HTTP/1.1 503 Unavailable\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n"
PATIENCE = 60.0
"""Seconds a call may take before the test calls it blocked (generous: a loaded host)."""


def _returns(call: Callable[[], Any]) -> bool:
    """Whether ``call`` returns within :data:`PATIENCE` (run on a thread of its own, so a
    call blocked for good fails the test instead of hanging it)."""
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(PATIENCE)
    return not thread.is_alive()


def test_a_stalled_fsync_blocks_neither_the_read_loop_nor_the_stop(
    collector: Callable[..., RawServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = collector(lambda connection, request: server.send(connection, UNAVAILABLE), timeout=1)
    output = ExporterOutput("otlp_proto_http")
    spool = Spool(str(tmp_path / "spool"), 1 << 20)
    output.use_spool(spool)
    stage = OutputStage(output, stop_timeout=60)

    stalled = threading.Event()
    release = threading.Event()
    real_fsync = os.fsync

    def stalling_fsync(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # a segment's data: the disk hangs
            stalled.set()
            release.wait(600)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", stalling_fsync)
    try:
        stage.write(_records())  # not taken: spooled by the output's thread, which stalls
        assert stalled.wait(PATIENCE)

        reader = SimpleNamespace(
            decoder=SimpleNamespace(stats=SimpleNamespace(records=4, undecodable=0)), lost=0
        )
        join_stage = SimpleNamespace(stats=SimpleNamespace(invalid_reasons={}))
        assert _returns(lambda: stage.write(_records()))  # the read loop hands on
        assert _returns(stage.parts)  # the progress line
        assert _returns(lambda: health_metrics.gather(reader, join_stage, stage, 0))
        assert not release.is_set()

        stage.stop_by(time.monotonic() + 1.0)
        assert _returns(stage.close)  # by its deadline, the disk still stalled
        assert not release.is_set()
    finally:
        release.set()
    # Nothing was spooled: every record is counted once, as not delivered at stop.
    assert stage.not_delivered == {"spans": 4, "logs": 4}
    assert not stage.spooled_at_stop
    # The writes still under way when the stop gave up are not put in place later.
    deadline = time.monotonic() + PATIENCE
    while any(p.suffix == ".tmp" for p in (tmp_path / "spool").rglob("*")):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert list((tmp_path / "spool").rglob("*.seg")) == [] and spool.spooled == {}


def test_the_stop_still_spools_when_the_disk_answers(
    collector: Callable[..., RawServer], tmp_path: Path
) -> None:
    """The control: with a disk that answers, what the collector never took is spooled at
    the stop, within the same deadline."""
    stuck = threading.Event()

    def never(connection: socket.socket, request: int) -> None:
        stuck.wait(120)

    collector(never, timeout=600)
    output = ExporterOutput("otlp_proto_http")
    spool = Spool(str(tmp_path / "spool"), 1 << 20)
    output.use_spool(spool)
    stage = OutputStage(output, stop_timeout=60)
    stage.write(_records())
    stage.write(_records())
    stage.stop_by(time.monotonic() + 1.0)
    stage.close()
    stuck.set()
    assert not stage.not_delivered and spool.spooled == {"spans": 4, "logs": 4}


class _Quiet:
    """An output that takes everything."""

    failed = 0

    def write(self, items: Any) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_stalled_health_file_blocks_neither_the_read_loop_nor_the_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--spool DIR``'s health file is written on a thread of its own: the read loop's
    health report returns while the write is stalled, and the stop's wait for the last one
    ends at its deadline."""
    stalled = threading.Event()
    release = threading.Event()
    real_write = health_metrics.write_health_file

    def stalling_write(directory: str, health: Any, name: str) -> None:
        stalled.set()
        release.wait(600)
        real_write(directory, health, name)

    monkeypatch.setattr(health_metrics, "write_health_file", stalling_write)
    reporter = health_metrics.HealthReporter(60, time.monotonic(), False, str(tmp_path))
    stage = OutputStage(_Quiet(), stop_timeout=5)
    reader = SimpleNamespace(
        decoder=SimpleNamespace(stats=SimpleNamespace(records=7, undecodable=0)), lost=0
    )
    join_stage = SimpleNamespace(stats=SimpleNamespace(invalid_reasons={}))
    try:
        assert _returns(lambda: reporter.report(reader, join_stage, stage, time.monotonic()))
        assert stalled.wait(PATIENCE)
        assert _returns(lambda: reporter.report(reader, join_stage, stage, time.monotonic()))
        assert _returns(lambda: reporter.finish(time.monotonic() + 0.5))  # the stop's wait
        assert not release.is_set() and health_metrics.read_health_file(str(tmp_path)) is None
    finally:
        release.set()
    assert reporter.file is not None and reporter.file.finish(time.monotonic() + PATIENCE)
    health = health_metrics.read_health_file(str(tmp_path))
    assert health is not None and health.read == 7  # the newest snapshot, written at last
    stage.close()
