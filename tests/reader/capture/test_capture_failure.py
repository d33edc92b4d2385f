# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record --capture`` when something fails: the tracefs instance is closed first (no
service keeps paying for a listener that is gone), the pages captured stay in their spool
files with a header beside them, the one-line error names them and how to make the
trace.dat, and the exit status is not 0. The kernel side is in
tests/kernel/test_captures.py."""

from __future__ import annotations

import argparse
import errno
import io
import shlex
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from opentelemetry_exporter_userevents.abi.tracefs import TracefsError
from opentelemetry_exporter_userevents.reader.capture import TraceDatWriter, trace_dat
from opentelemetry_exporter_userevents.reader.capture.trace_dat import (
    SpoolKeptError,
    read_trace_dat,
)
from opentelemetry_exporter_userevents.reader.commands.capture import capture
from opentelemetry_exporter_userevents.reader.live.eventheader_providers import ProviderDiscovery
from tests.support.captures import HEADER_EVENT
from tests.support.pages import HEADER_PAGE, data_event, page

FORMAT = (
    "user_events_multi",
    "name: otel_span.1f\nID: 1234\nformat:\n\tfield:u32 x;\toffset:8;\tsize:4;\tsigned:0;\n\n"
    'print fmt: "%u"\n',
)
PAGES = [(n % 2, page(1000 + n, [data_event(0, bytes([n, 0, 0, 0]))])) for n in range(5)]


class FakeTracefs:
    def header_page(self) -> str:
        return HEADER_PAGE

    def header_event(self) -> str:
        return HEADER_EVENT

    def saved_cmdlines(self) -> str:
        return "42 app\n"


class FakeReader:
    """What capture() uses of a TraceReader; notes what was on disk when it was closed."""

    def __init__(self, tmp_path: Path, fail: BaseException | None = None) -> None:
        self.tmp_path = tmp_path
        self.fail = fail
        self.decoder = SimpleNamespace(layout=SimpleNamespace(page_size=4096))
        self.instance = "otel-userevents.1.2.0.pidns3"
        self.tracepoints = {"user_events_multi/otel_span.1f": "span"}
        self.lost = 0
        self.cleanup_error: str | None = None
        self.events: list[Any] = []
        self.writes: list[str] = []
        self._pages = list(PAGES)

    def start(self) -> FakeReader:
        self.events.append("start")
        return self

    def capture(self) -> list[tuple[int, bytes]]:
        pages, self._pages = self._pages, []
        if self.fail is not None and not pages:
            raise self.fail
        return pages

    def read_cpu_pages(self) -> list[tuple[int, bytes]]:
        return []

    def wait(self, timeout: float) -> None:
        time.sleep(timeout)

    def late_services(self) -> list[Any]:
        return []

    def late_providers(self) -> list[Any]:
        return []

    @property
    def providers(self) -> ProviderDiscovery:
        return ProviderDiscovery(())

    found_later_not_remembered = 0
    announcements = None

    def formats(self) -> list[tuple[str, str]]:
        return [FORMAT]

    def close(self) -> None:
        spools = sorted(p.name for d in self.tmp_path.glob(".capture-*") for p in d.iterdir())
        self.events.append(("close", spools, list(self.writes)))


@pytest.fixture
def writes(monkeypatch) -> list[str]:
    """Paths TraceDatWriter.close was asked to write, in order."""
    calls: list[str] = []
    real_close = TraceDatWriter.close

    def close(self: TraceDatWriter, cmdlines: str = "") -> None:
        calls.append(self.path)
        real_close(self, cmdlines)

    monkeypatch.setattr(TraceDatWriter, "close", close)
    return calls


def _args(path: Path, duration: float = 0.05) -> argparse.Namespace:
    return argparse.Namespace(capture=str(path), ready_file=None, duration=duration)


def _run(reader: FakeReader, path: Path, writes: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    reader.writes = writes  # what TraceDatWriter.close was asked for before the reader closed
    code = capture(_args(path), reader, FakeTracefs(), err)  # type: ignore[arg-type]
    ready, _, rest = err.getvalue().partition("\n")
    assert ready.startswith(f"otel-userevents: recording prefix otel for 0.05 s into {path} ")
    return code, rest  # what came after the line that says it listens


def _remade(err: str, path: Path) -> bytes:
    """Run the command the error names (``cat ... > FILE``), to ``path``."""
    command = err.split("make the trace.dat with: ", 1)[1].strip()
    files = shlex.split(command.split(" > ", 1)[0])[1:]
    return subprocess.run(["cat", *files], check=True, capture_output=True).stdout


def _pages_of(data: bytes) -> list[tuple[int, bytes]]:
    return [(cpu, bytes(p)) for cpu, p in read_trace_dat(data).pages()]


def _in_cpu_order(pages: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    return [p for cpu in (0, 1) for p in pages if p[0] == cpu]


def test_a_capture_that_succeeds_closes_the_reader_before_writing(tmp_path, writes):
    reader = FakeReader(tmp_path)
    path = tmp_path / "capture.dat"
    code, err = _run(reader, path, writes)
    assert code == 0, err
    assert reader.events == ["start", ("close", ["cpu0", "cpu1"], [])]
    assert writes == [str(path)]
    assert _pages_of(path.read_bytes()) == _in_cpu_order(PAGES)
    assert not list(tmp_path.glob(".capture-*"))
    assert err.startswith("otel-userevents: stopped (duration): 5 pages")


def test_a_destination_that_is_a_directory_keeps_the_spools_and_names_them(tmp_path, writes):
    path = tmp_path / "capture.dat"
    path.mkdir()
    reader = FakeReader(tmp_path)
    code, err = _run(reader, path, writes)

    assert code == 1
    assert reader.events == ["start", ("close", ["cpu0", "cpu1"], [])]  # before any write
    (spool_dir,) = tmp_path.glob(".capture-*")
    assert sorted(p.name for p in spool_dir.iterdir()) == ["cpu0", "cpu1", "header"]
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"otel-userevents: could not write {path}: Is a directory; ")
    assert f"5 pages kept in {spool_dir}; make the trace.dat with: cat " in err
    remade = _remade(err, path)
    assert _pages_of(remade) == _in_cpu_order(PAGES)
    assert read_trace_dat(remade).tracing.formats == [FORMAT]


def _failing_output(monkeypatch, path: Path, after: int) -> None:
    """The trace.dat's file system is full after ``after`` bytes (its spools' is not)."""
    real = trace_dat.open_private

    class Full:
        def __init__(self, f: Any) -> None:
            self.f, self.written = f, 0

        def write(self, data: bytes) -> int:
            if self.written + len(data) > after:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.written += len(data)
            return int(self.f.write(data))

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

    def open_private(name: str, mode: str = "w", buffering: int = -1) -> Any:
        f = real(name, mode, buffering)  # type: ignore[call-overload]
        return Full(f) if name == str(path) else f

    monkeypatch.setattr(trace_dat, "open_private", open_private)


def test_a_full_disk_removes_the_partial_file_and_keeps_the_spools(tmp_path, writes, monkeypatch):
    path = tmp_path / "capture.dat"
    _failing_output(monkeypatch, path, after=3 * 4096)
    reader = FakeReader(tmp_path)
    code, err = _run(reader, path, writes)

    assert code == 1 and err.count("\n") == 1
    assert reader.events == ["start", ("close", ["cpu0", "cpu1"], [])]
    assert err.startswith(f"otel-userevents: could not write {path}: No space left on device; ")
    assert not path.exists()  # a partial trace.dat would mislead, and holds the space
    assert _pages_of(_remade(err, path)) == _in_cpu_order(PAGES)


def test_an_error_while_capturing_still_writes_what_was_kept_and_exits_1(tmp_path, writes):
    path = tmp_path / "capture.dat"
    reader = FakeReader(tmp_path, fail=OSError(errno.EIO, "Input/output error", "trace_pipe_raw"))
    code, err = _run(reader, path, writes)

    assert code == 1
    assert err == (
        "otel-userevents: capture stopped: trace_pipe_raw: Input/output error; 5 pages "
        f"(0.0 MiB) of 1 tracepoints captured to {path} (trace.dat v6), lost 0; rebuild "
        f"with: otel-userevents decode {path}\n"
    )
    assert _pages_of(path.read_bytes()) == _in_cpu_order(PAGES)


def test_a_second_ctrl_c_keeps_the_spools_without_writing(tmp_path, writes):
    path = tmp_path / "capture.dat"
    reader = FakeReader(tmp_path, fail=KeyboardInterrupt())
    code, err = _run(reader, path, writes)

    assert code == 130 and writes == [] and not path.exists()
    assert reader.events == ["start", ("close", ["cpu0", "cpu1"], [])]
    assert err.startswith("otel-userevents: capture stopped (interrupted twice): 5 pages kept")
    assert _pages_of(_remade(err, path)) == _in_cpu_order(PAGES)


def test_one_ctrl_c_while_stopping_for_an_error_is_not_a_second_one(tmp_path, writes):
    """The error stops the loop and the signal handlers go back; a Ctrl-C then (the first)
    interrupts the unwinding: the error is why it stopped, and the capture is written."""
    path = tmp_path / "capture.dat"
    interrupt = KeyboardInterrupt()
    interrupt.__context__ = OSError(errno.ENOSPC, "No space left on device", "spool")
    reader = FakeReader(tmp_path, fail=interrupt)
    code, err = _run(reader, path, writes)

    assert code == 1
    assert err.startswith("otel-userevents: capture stopped: spool: No space left on device; ")
    assert _pages_of(path.read_bytes()) == _in_cpu_order(PAGES)


def test_a_reader_that_cannot_start_leaves_nothing(tmp_path, writes):
    reader = FakeReader(tmp_path)

    def refuse() -> FakeReader:
        raise TracefsError("permission denied")

    reader.start = refuse  # type: ignore[method-assign]
    with pytest.raises(TracefsError):
        _run(reader, tmp_path / "capture.dat", writes)
    assert reader.events == [("close", [], [])] and writes == []
    assert not list(tmp_path.glob(".capture-*"))


def test_a_spool_that_fills_up_is_cut_back_to_whole_pages(tmp_path):
    writer = TraceDatWriter(str(tmp_path / "capture.dat"), 4096, HEADER_PAGE, HEADER_EVENT)
    writer.add_page(0, PAGES[0][1])
    real = writer._spools[0]

    class HalfFull:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def write(self, data: bytes) -> int:
            real.write(data[:1000])
            real.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

    writer._spools[0] = HalfFull()  # type: ignore[assignment]
    with pytest.raises(OSError, match="No space") as raised:
        writer.add_page(0, PAGES[2][1])
    assert raised.value.filename == str(Path(writer.spool_dir, "cpu0"))
    writer._spools[0] = real
    assert writer.pages == 1 and Path(writer.spool_dir, "cpu0").stat().st_size == 4096
    kept = writer.keep()
    assert kept == writer.keep() and "1 pages kept" in kept
    writer.close()  # after keep: nothing more
    assert Path(writer.spool_dir, "header").exists()


def test_spool_kept_error_is_an_os_error_naming_the_spools(tmp_path):
    path = tmp_path / "capture.dat"
    path.mkdir()
    writer = TraceDatWriter(str(path), 4096, HEADER_PAGE, HEADER_EVENT)
    writer.add_page(1, PAGES[1][1])
    with pytest.raises(SpoolKeptError) as raised:
        writer.close()
    assert raised.value.errno == errno.EISDIR and raised.value.spool_dir == writer.spool_dir
    assert "1 pages kept in" in str(raised.value)


def test_a_full_disk_while_spooling_stops_the_capture_with_one_line(tmp_path, writes, monkeypatch):
    """The spools' file system fills (so does the trace.dat's): the capture stops, the
    reader is closed, and one line says why and where the pages taken so far are."""
    path = tmp_path / "capture.dat"
    _failing_output(monkeypatch, path, after=0)
    real = trace_dat.open_private
    full = OSError(errno.ENOSPC, "No space left on device")

    class FullSpool:
        def __init__(self, f: Any) -> None:
            self.f = f

        def __getattr__(self, name: str) -> Any:
            return getattr(self.f, name)

        def write(self, data: bytes) -> int:
            raise full

    def open_private(name: str, mode: str = "w", buffering: int = -1) -> Any:
        f = real(name, mode, buffering)  # type: ignore[call-overload]
        return FullSpool(f) if name.endswith("cpu1") else f

    monkeypatch.setattr(trace_dat, "open_private", open_private)
    reader = FakeReader(tmp_path)
    code, err = _run(reader, path, writes)

    (spool_dir,) = tmp_path.glob(".capture-*")
    assert code == 1 and err.count("\n") == 1, err
    assert reader.events == ["start", ("close", ["cpu0", "cpu1"], [])]
    assert err.startswith(
        f"otel-userevents: capture stopped: {spool_dir}/cpu1: No space left on device; "
        f"could not write {path}: No space left on device; 1 pages kept in {spool_dir}; "
    ), err
    assert _pages_of(_remade(err, path)) == [PAGES[0]]
