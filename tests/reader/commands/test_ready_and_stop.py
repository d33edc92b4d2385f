# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Ready and stop: one ready line in every mode (a script that waits for ``recording`` does
not wait forever for ``hist``), and Ctrl-C, SIGTERM and SIGHUP honoured from the entry
point's first instruction, each with a line and an exit code that ``--help`` lists."""

from __future__ import annotations

import argparse
import io
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.commands import hist as hist_command
from opentelemetry_exporter_userevents.reader.commands import status as status_command
from opentelemetry_exporter_userevents.reader.commands.common import say_ready
from opentelemetry_exporter_userevents.reader.stop_early import StoppedEarly, said
from tests.support.readme_commands import documentation

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[3]
READY = re.compile(
    r"^otel-userevents: recording (prefix \w+|every prefix)( for [\d.]+ s)?(?P<how>.*) "
    r"\(tracefs instance \S+\); Ctrl-C or SIGTERM stops it$"
)


def _ready_line(argv: list[str]) -> str:
    args = cli.parser().parse_args(argv)
    err = io.StringIO()
    how = {"hist": " as the kernel's counts"}.get(args.command, "")
    if getattr(args, "capture", None):
        how = f" into {args.capture}"
    say_ready(args, "otel-userevents.1.2.3", err, how)
    return err.getvalue().rstrip("\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["record"],
        ["record", "--capture", "trace.dat", "--duration", "5"],
        ["hist", "--prefix", "checkout"],
        ["--prefix", "*", "record"],
    ],
)
def test_the_ready_line_has_one_form_in_every_mode(argv):
    line = _ready_line(argv)
    assert READY.match(line), line


class _FakeCollector:
    instance = "otel-userevents.hist"
    tracepoints = ["otel_span"]
    cleanup_error = None

    def start(self) -> None:
        pass

    def poll(self) -> None:
        pass

    def wait(self, seconds: float) -> None:
        pass

    def read(self) -> SimpleNamespace:
        return SimpleNamespace(tables=[], problems={})

    def close(self) -> None:
        pass


def test_hist_says_recording_as_record_does_then_writes_the_ready_file(
    monkeypatch, capsys, tmp_path
):
    monkeypatch.setattr(hist_command, "tracefs_of", lambda args: None)
    monkeypatch.setattr(hist_command, "HistCollector", lambda *a, **k: _FakeCollector())
    monkeypatch.setattr(hist_command, "render", lambda tables, out: None)
    ready = tmp_path / "ready"
    assert cli.main(["hist", "--duration", "0.05", "--ready-file", str(ready)]) == 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "Ctrl-C" in x]
    assert READY.match(line), line
    assert line.startswith("otel-userevents: recording prefix otel for 0.05 s as the kernel's")
    assert ready.read_text() == "otel-userevents.hist"


ENTRY_POINT_HOOK = """
import importlib, os, signal, sys
signal.signal(signal.SIG{name}, signal.SIG_{start})  # SIG_IGN: as sh starts background jobs
module, _, function = {entry!r}.partition(":")

class SignalledWhileLoading:
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "opentelemetry_exporter_userevents.reader.cli":
            os.kill(os.getpid(), signal.SIG{name})  # as the command line's modules load
        return None

sys.meta_path.insert(0, SignalledWhileLoading())
sys.argv = ["otel-userevents", "--tracefs", {tracefs!r}, "record", "-o", os.devnull]
sys.exit(getattr(importlib.import_module(module), function)())
"""


def _entry_point() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return str(project["scripts"]["otel-userevents"])


@pytest.mark.parametrize(
    ("name", "start", "code", "said"),
    [
        ("INT", "IGN", 130, "otel-userevents: interrupted\n"),
        ("INT", "DFL", 130, "otel-userevents: interrupted\n"),
        ("TERM", "DFL", 143, "otel-userevents: stopped (SIGTERM)\n"),
        ("TERM", "IGN", 143, "otel-userevents: stopped (SIGTERM)\n"),
        ("HUP", "DFL", 129, "otel-userevents: stopped (SIGHUP)\n"),
    ],
)
def test_a_signal_before_the_command_line_loads_is_honoured_with_a_line_and_a_listed_code(
    tmp_path, name, start, code, said
):
    """The signal comes as the entry point imports the command line's first module: the
    handlers must be set before it (Ctrl-C was ignored there where it came ignored, and
    SIGTERM killed the reader with 143 and nothing said)."""
    done = subprocess.run(
        [sys.executable, "-c", ENTRY_POINT_HOOK.format(
            name=name, start=start, entry=_entry_point(), tracefs=str(tmp_path))],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (code, said)


def test_sighup_that_came_ignored_stays_ignored(tmp_path):
    """``nohup otel-userevents ...``: a hang-up is not a stop."""
    done = subprocess.run(
        [sys.executable, "-c", ENTRY_POINT_HOOK.format(
            name="HUP", start="IGN", entry=_entry_point(), tracefs=str(tmp_path))],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1  # it went on, to the missing tracefs
    assert "stopped" not in done.stderr


def test_sigterm_while_status_runs_exits_143_and_the_handlers_are_given_back(monkeypatch, capsys):
    before = signal.getsignal(signal.SIGTERM)

    def status(args: argparse.Namespace, out: object) -> int:
        signal.raise_signal(signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop status")

    monkeypatch.setattr(status_command, "status", status)
    assert cli.main(["status"]) == 143
    assert capsys.readouterr().err == "otel-userevents: stopped (SIGTERM)\n"
    assert signal.getsignal(signal.SIGTERM) is before


def test_help_and_readme_list_every_exit_code(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    readme = documentation()  # README.rst and docs/reader.rst
    for code, meaning in (("130", "interrupted"), ("143", "stopped by SIGTERM")):
        assert re.search(rf"^  {code} +{meaning}", out, re.M), code
        assert re.search(rf"``{code}``\s+{meaning}", readme), code
    assert "(129: SIGHUP)" in " ".join(out.split())
    assert "(129: SIGHUP)" in " ".join(readme.split())


def test_a_stop_line_a_hung_up_terminal_cannot_take_still_gives_the_code(monkeypatch):
    class HungUp:
        def write(self, text: str) -> int:
            raise OSError(5, "Input/output error")

        def flush(self) -> None:
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(sys, "stderr", HungUp())
    assert said(StoppedEarly(signal.SIGHUP)) == 129
    assert said(KeyboardInterrupt()) == 130
