# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Every option is checked before anything starts: a bad value is a usage error (exit 2)
that names the option, in the words its ``--help`` uses, with the subcommand's usage; no
command module is loaded and no tracefs touched first (in the test bed that start-up took
20 s before ``--exporter nosuch`` was refused)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.reader import cli, options
from tests.reader.capture.test_capture import _capture, _pages, _records


@pytest.fixture
def never_run(monkeypatch):
    """The command must not run: the option is refused before it."""

    def run(args: object) -> int:
        raise AssertionError("the command ran with a bad option")

    monkeypatch.setattr(cli, "_run", run)


def _refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    assert raised.value.code == 2
    return str(capsys.readouterr().err)


def _help(command: str, capsys) -> str:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"] if command != "decode" else ["decode", "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("argv", "option", "words"),
    [
        (["record", "--duration", "abc"], "--duration", "seconds, more than 0"),
        (["hist", "--duration", "abc"], "--duration", "seconds, more than 0"),
        (["record", "--buffer-size-kb", "-5"], "--buffer-size-kb", "a whole number, at least 1"),
        (["record", "--buffer-size-kb", "4k"], "--buffer-size-kb", "a whole number, at least 1"),
        (["record", "--kernel-budget", "x"], "--kernel-budget", "a whole number, at least 1"),
        (["record", "--workers", "two"], "--workers", "a whole number, at least 1"),
        (["record", "--spool-max-mb", "0"], "--spool-max-mb", "a whole number, at least 1"),
        (["record", "--stop-timeout", "soon"], "--stop-timeout", "seconds, 0 or more"),
        (["record", "--health-interval", "-1"], "--health-interval", "seconds, 0 or more"),
        (["record", "--kernel-wait-threshold", "-1"], "--kernel-wait-threshold",
         "milliseconds, 0 or more"),
        (["decode", "f", "--kernel-wait-threshold", "x"], "--kernel-wait-threshold",
         "milliseconds, 0 or more"),
    ],
)  # fmt: skip
def test_a_bad_value_is_refused_naming_the_option_in_the_words_of_its_help(
    argv, option, words, capsys, never_run
):
    command = argv[0]
    err = _refused(argv, capsys)
    assert err.startswith(f"usage: otel-userevents {command} ")
    assert f"otel-userevents {command}: error: argument {option}: " in err
    assert words in err
    assert "_duration" not in err and "_positive" not in err and "invalid" not in err
    assert words in _help(command, capsys)


@pytest.mark.parametrize(
    "argv", [["record", "--kernel", "foo"], ["decode", "f", "--kernel", "foo,sched"]]
)
def test_an_unknown_kernel_group_is_refused_before_start_up(argv, capsys, never_run):
    err = _refused(argv, capsys)
    assert f"otel-userevents {argv[0]}: error: argument --kernel: " in err
    assert "unknown kernel group foo: choose from sched, syscalls" in err


def test_a_kernel_group_list_that_is_right_is_kept_as_given():
    args = cli.parser().parse_args(["record", "--kernel", "sched,syscalls"])
    assert args.kernel == "sched,syscalls"


def test_an_exporter_that_is_not_installed_is_refused_listing_those_that_are(capsys, never_run):
    err = _refused(["record", "--exporter", "nosuch"], capsys)
    assert "argument --exporter: no exporter named 'nosuch' (installed: " in err
    assert "console" in err.rsplit("installed: ", 1)[1]


@pytest.mark.parametrize(
    ("name", "package"),
    [
        ("otlp_proto_http", "opentelemetry-exporter-otlp-proto-http"),
        ("otlp_proto_grpc", "opentelemetry-exporter-otlp-proto-grpc"),
    ],
)
def test_a_known_exporter_whose_package_is_missing_names_the_package(
    name, package, monkeypatch, capsys, never_run
):
    monkeypatch.setattr(options, "exporters", lambda: ["console"])
    for command in (["record"], ["decode", "f"]):
        err = _refused([*command, "--exporter", name], capsys)
        assert f"argument --exporter: {name} is not installed: pip install {package}" in err
        assert "(installed: console)" in err


def test_the_reader_is_not_its_own_exporter(capsys, never_run):
    err = _refused(["record", "--exporter", "user_events"], capsys)
    assert "would feed the reader its own output" in err


def test_an_unknown_option_of_a_command_prints_that_commands_usage(capsys, never_run):
    err = _refused(["record", "--bogus"], capsys)
    assert err.startswith("usage: otel-userevents record ")
    assert "otel-userevents record: error: unrecognized arguments: --bogus" in err
    err = _refused(["--bogus", "status"], capsys)  # before the command: the top-level usage
    assert err.startswith("usage: otel-userevents [-h]")


def test_a_spool_without_an_exporter_is_refused_before_start_up(tmp_path, capsys, never_run):
    err = _refused(["record", "--spool", str(tmp_path / "spool")], capsys)
    assert "otel-userevents record: error: --spool keeps OTLP/HTTP requests" in err
    assert not (tmp_path / "spool").exists()


@pytest.mark.parametrize("output", ["-", "/dev/stdout"])
def test_decode_writes_to_standard_output_for_a_dash_or_dev_stdout(
    output, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)  # a file named '-' would land here
    path = _capture(tmp_path, _pages(_records()[2]))
    assert cli.main(["decode", path, "-o", output, "--workers", "1"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert any("resourceSpans" in line for line in lines)
    assert not Path(tmp_path / "-").exists()


def test_help_says_a_dash_is_standard_output(capsys):
    assert "'-' is standard output" in _help("decode", capsys)
