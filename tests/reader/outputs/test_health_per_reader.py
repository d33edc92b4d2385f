# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Two readers on one ``--spool DIR`` (a rolling update) each keep their own health file,
named after their spool namespace, and ``status`` shows each, running or exited, told by the
namespace's lock (both wrote ``DIR/health.json``: ``status`` showed the one that wrote
last). The health files of exited readers past the newest few are removed by the next
reader."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry_exporter_userevents.reader.commands.status import reader_health  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs import health_files  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs import health_metrics as hm  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import Spool  # noqa: E402


class _Quiet:
    failed = 0

    def write(self, items: object) -> None:
        pass

    def close(self) -> None:
        pass


def _report(directory: Path, spool: Spool, records: int) -> None:
    """One health file of the reader whose spool is ``spool``, ``records`` read."""
    name = health_files.health_file(spool.name)
    reporter = hm.HealthReporter(60, 0.0, False, str(directory), name)
    reader = SimpleNamespace(
        decoder=SimpleNamespace(stats=SimpleNamespace(records=records, undecodable=0)), lost=0
    )
    join_stage = SimpleNamespace(stats=SimpleNamespace(invalid_reasons={}))
    stage = OutputStage(_Quiet(), stop_timeout=5)
    reporter.report(reader, join_stage, stage, 0.0)
    assert reporter.file is not None and reporter.file.finish(time.monotonic() + 60)
    stage.close()


def _status(directory: Path) -> str:
    out = io.StringIO()
    reader_health(str(directory), out)
    return out.getvalue()


def test_two_readers_on_one_spool_each_have_their_health_and_status_shows_both(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "spool"
    a = Spool(str(directory), 1 << 20)
    b = Spool(str(directory), 1 << 20)  # a rolling update: B starts while A runs
    _report(directory, a, 7)
    _report(directory, b, 9)
    assert sorted(health_files.health_files(str(directory))) == sorted(
        [health_files.health_file(a.name), health_files.health_file(b.name)]
    )
    text = _status(directory)
    assert f"reader health ({a.name}, pid {os.getpid()}, running," in text
    assert f"reader health ({b.name}, pid {os.getpid()}, running," in text
    assert "records: 7 read" in text and "records: 9 read" in text  # neither overwritten
    a.close()  # A exits, its namespace empty: removed; its last health kept for status
    assert not (directory / a.name).exists() and (directory / b.name).is_dir()
    text = _status(directory)
    assert f"reader health ({a.name}, pid {os.getpid()}, exited," in text
    assert f"reader health ({b.name}, pid {os.getpid()}, running," in text
    b.close()


def test_a_reader_with_segments_left_is_told_exited_by_its_free_lock(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    a = Spool(str(directory), 1 << 20)
    assert a.put("spans", 3, b"left")
    _report(directory, a, 3)
    a.close()  # its lock released, its namespace kept: it holds a request
    assert (directory / a.name).is_dir()
    assert health_files.reader_state(str(directory), health_files.health_file(a.name)) == (
        health_files.EXITED
    )
    assert f"({a.name}, pid {os.getpid()}, exited," in _status(directory)


def test_a_reader_removes_the_exited_readers_health_files_but_the_newest(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "spool"
    running = Spool(str(directory), 1 << 20)
    _report(directory, running, 1)
    exited = [f"health-reader-{n:016x}.json" for n in range(7)]
    for n, name in enumerate(exited):  # readers that exited, oldest first
        hm.write_health_file(str(directory), hm.Health(read=n), name)
        os.utime(directory / name, ns=(n * 10**9, n * 10**9))
    hm.write_health_file(str(directory), hm.Health(read=99))  # the version before's
    newcomer = Spool(str(directory), 1 << 20)
    _report(directory, newcomer, 2)
    kept = set(health_files.health_files(str(directory)))
    assert kept == {
        *exited[-health_files.KEEP_EXITED :],
        health_files.health_file(running.name),
        health_files.health_file(newcomer.name),
        health_files.LEGACY,
    }
    running.close()
    newcomer.close()
