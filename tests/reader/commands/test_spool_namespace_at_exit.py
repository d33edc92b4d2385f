# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A ``record --spool DIR`` that exits with nothing left in the spool removes its namespace
(``DIR/reader-<16 hex>/``: each exit left an empty one behind, for every reader after to
look into); one that leaves requests keeps it, for the next reader to take over."""

from __future__ import annotations

import io
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry_exporter_userevents.reader.commands.status import reader_health  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs import health_files  # noqa: E402
from tests.reader.outputs.conftest import collector  # noqa: E402, F401
from tests.reader.outputs.test_health_metrics import _CountingReader, _record  # noqa: E402
from tests.reader.outputs.test_otlp_http_output import Receiver, receiver  # noqa: E402, F401
from tests.reader.views.test_process_view import app_records  # noqa: E402
from tests.support.raw_collector import RawServer  # noqa: E402


def _status(directory: Path) -> str:
    out = io.StringIO()
    reader_health(str(directory), out)
    return out.getvalue()


def test_record_removes_its_namespace_when_it_exits_with_nothing_left(
    monkeypatch: pytest.MonkeyPatch,
    receiver: Receiver,  # noqa: F811
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    code, err, _took = _record(
        monkeypatch,
        ["--exporter", "otlp_proto_http", "--duration", "0.3", "--health-interval", "0.1",
         "--spool", str(spool)],
        _CountingReader(app_records(5001)),
    )  # fmt: skip
    assert code == 0, err
    names = sorted(p.name for p in spool.iterdir())
    assert len(names) == 1 and health_files.NAME.match(names[0]), names  # no reader-*/ left
    assert ", exited," in _status(spool)


def test_record_keeps_its_namespace_when_requests_are_left_in_it(
    monkeypatch: pytest.MonkeyPatch,
    collector: Callable[..., RawServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    def unavailable(connection: socket.socket, request: int) -> None:
        server.send(connection, b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")

    server = collector(unavailable, timeout=1)
    spool = tmp_path / "spool"
    code, err, _took = _record(
        monkeypatch,
        ["--exporter", "otlp_proto_http", "--duration", "0.3", "--health-interval", "0",
         "--spool", str(spool), "--stop-timeout", "3"],
        _CountingReader(app_records(5001)),
    )  # fmt: skip
    assert code == 0, err
    assert "left in the spool" in err
    namespaces = [p for p in spool.iterdir() if p.name.startswith("reader-")]
    assert len(namespaces) == 1 and any(p.suffix == ".seg" for p in namespaces[0].iterdir())
