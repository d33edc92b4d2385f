# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents`` at start: its signal handlers set before anything heavy is imported,
Ctrl-C and SIGTERM honoured from its first line, a line on stderr when it listens, and
only the modules its command and output use (no write side, no SDK spans, logs or
metrics, no protobuf for OTLP/JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.commands import record as record_command
from tests.reader.capture.test_capture import _capture, _pages, _records
from tests.reader.pipeline.test_worker_pool import _FakeReader
from tests.support.readme_commands import documentation

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = "opentelemetry_exporter_userevents"
NOT_FOR_OTLP_JSON = (
    f"{PACKAGE}._export",  # the write side
    f"{PACKAGE}.span_exporter",
    f"{PACKAGE}.log_exporter",
    f"{PACKAGE}.metric_exporter",
    f"{PACKAGE}.processors",
    f"{PACKAGE}.lean_tracer",
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk._logs",
    "opentelemetry.sdk.metrics",
    "google.protobuf",
    "opentelemetry.proto",
    "opentelemetry.exporter.otlp.proto.common",  # the OTLP encoder (its parents are namespaces)
    "http.client",
)


def _python(code: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
        **kwargs,  # type: ignore[call-overload]
    )  # fmt: skip


def _modules_after(code: str) -> set[str]:
    done = _python(code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))")
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def _heavy(modules: set[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy))


def test_the_command_line_module_imports_nothing_heavy_before_main_sets_its_handlers():
    """What ``otel-userevents`` imports before ``main`` runs: the standard library and
    four small modules of ours, never the commands, the kernel contract or the SDK."""
    modules = _modules_after(f"import {PACKAGE}.reader.cli")
    ours = {m for m in modules if m.startswith(PACKAGE)}
    assert ours <= {
        PACKAGE,
        f"{PACKAGE}.version",
        f"{PACKAGE}.environment_variables",
        f"{PACKAGE}.reader",
        f"{PACKAGE}.reader.cli",
        f"{PACKAGE}.reader.stop_early",
        f"{PACKAGE}.reader.options",
        f"{PACKAGE}.reader.delivery_flags",
        f"{PACKAGE}.reader.private_file",
        f"{PACKAGE}.reader.terminal_text",
        f"{PACKAGE}.reader.pipeline",  # its __init__ is a docstring
        f"{PACKAGE}.reader.pipeline.worker_count",
    }, sorted(ours)
    assert not _heavy(modules, ("opentelemetry", "google"))


def test_decode_to_otlp_json_loads_no_write_side_no_sdk_records_and_no_protobuf(tmp_path):
    path = _capture(tmp_path, _pages(_records()[2]))
    out = tmp_path / "out.jsonl"
    modules = _modules_after(
        f"from {PACKAGE}.reader import cli\n"
        f"assert cli.main(['decode', {path!r}, '-o', {str(out)!r}, '--workers', '1']) == 0"
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert any("resourceSpans" in line for line in lines)  # it did rebuild spans and logs
    assert any("resourceLogs" in line for line in lines)
    assert not _heavy(modules, NOT_FOR_OTLP_JSON)


def test_record_to_otlp_json_loads_no_write_side_no_sdk_records_and_no_protobuf(tmp_path):
    """As far as a host without user_events lets it go: every module ``record`` imports
    before it touches tracefs (which fails here, exit 1)."""
    modules = _modules_after(
        f"from {PACKAGE}.reader import cli\n"
        f"assert cli.main(['--tracefs', {str(tmp_path)!r}, 'record', '-o', "
        f"{str(tmp_path / 'out.jsonl')!r}, '--workers', '1']) == 1"
    )
    assert f"{PACKAGE}.reader.commands.record" in modules
    assert not _heavy(modules, NOT_FOR_OTLP_JSON)


IMPORT_HOOK = f"""
import builtins, os, signal, sys
signal.signal(signal.SIG{{name}}, signal.SIG_IGN)  # as a background job of sh is started
from {PACKAGE}.reader import cli
real_import = builtins.__import__

def signalled_while_loading(name, *args, **kwargs):
    if name == "{PACKAGE}.reader.commands.record":
        os.kill(os.getpid(), signal.SIG{{name}})  # while the command's modules load
    return real_import(name, *args, **kwargs)

builtins.__import__ = signalled_while_loading
sys.exit(cli.main(["--tracefs", {{tracefs!r}}, "record", "-o", os.devnull]))
"""


def test_ctrl_c_while_the_command_loads_exits_130_without_a_traceback(tmp_path):
    """Even where SIGINT came ignored (``sh`` starts background jobs so): it was ignored
    for the first 54 s of a reader started so in the test bed."""
    done = _python(IMPORT_HOOK.format(name="INT", tracefs=str(tmp_path)))
    assert (done.returncode, done.stderr) == (130, "otel-userevents: interrupted\n")


def test_sigterm_while_the_command_loads_ends_it_with_143_even_where_it_came_ignored(tmp_path):
    done = _python(IMPORT_HOOK.format(name="TERM", tracefs=str(tmp_path)))
    assert (done.returncode, done.stderr) == (143, "otel-userevents: stopped (SIGTERM)\n")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "recording prefix otel (tracefs instance fake)"),
        (["--prefix", "*", "--duration", "0.5"], "recording every prefix for 0.5 s"),
    ],
)
def test_record_says_once_when_it_listens_and_then_writes_the_ready_file(
    monkeypatch, capsys, tmp_path, argv, said
):
    ready = tmp_path / "ready"
    reader = _FakeReader([])
    said_before_the_file: list[bool] = []
    monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
    monkeypatch.setattr(record_command, "TraceReader", lambda *a, **k: reader)
    real_say = record_command.say_ready

    def say_ready(*args: object) -> None:
        real_say(*args)  # type: ignore[arg-type]
        said_before_the_file.append("recording" in capsys.readouterr().err)

    monkeypatch.setattr(record_command, "say_ready", say_ready)
    argv = ["record", *argv, "--no-resource-detection", "--workers", "1",
            "--ready-file", str(ready)]  # fmt: skip
    if "--duration" not in argv:
        argv += ["--duration", "0.1"]
        said = said.replace("otel (", "otel for 0.1 s (")
    assert cli.main(argv) == 0
    assert said_before_the_file == [True]
    assert ready.read_text() == "fake"


def test_the_ready_line_reads_as_the_readme_shows_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
    monkeypatch.setattr(record_command, "TraceReader", lambda *a, **k: _FakeReader([]))
    argv = ["record", "--duration", "0.1", "--no-resource-detection", "--workers", "1"]
    assert cli.main(argv) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "Ctrl-C" in line]
    assert lines == [
        "otel-userevents: recording prefix otel for 0.1 s (tracefs instance fake); "
        "Ctrl-C or SIGTERM stops it"
    ]
    assert documentation().count("; Ctrl-C or SIGTERM stops it") >= 1


def test_help_leaves_the_entry_points_unread():
    """Listing the installed exporters loads importlib.metadata (a fifth of ``--help``'s
    CPU): only ``--exporter`` and the help of ``record`` and ``decode`` need it."""
    modules = _modules_after(
        f"from {PACKAGE}.reader import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
    )
    assert "importlib.metadata" not in modules
