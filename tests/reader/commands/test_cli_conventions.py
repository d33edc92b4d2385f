# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents`` as an operator meets it, following perf, trace-cmd and
opentelemetry-instrument: ``--version``, every option's default in ``--help``, bad values
refused as usage errors, the exit codes, and messages that say what happened."""

from __future__ import annotations

import argparse
import re
from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.commands import record as record_command
from opentelemetry_exporter_userevents.reader.commands import status as status_command
from opentelemetry_exporter_userevents.reader.commands.common import UsageError, rate
from opentelemetry_exporter_userevents.reader.commands.record import filter_report
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.native.native_core import READER_CORE, load_core
from opentelemetry_exporter_userevents.reader.pipeline.worker_loop import add_formats, decode_chunk
from opentelemetry_exporter_userevents.reader.private_file import PrivateFileError, open_private
from opentelemetry_exporter_userevents.record import schema
from opentelemetry_exporter_userevents.record.tracepoints import single_format_name
from opentelemetry_exporter_userevents.version import __version__
from tests.reader.capture.test_capture import FORMATS, MULTI, _capture, _pages, _records
from tests.reader.pipeline.test_worker_pool import _FakeReader
from tests.support.pages import data_event, page, record
from tests.support.readme_commands import documentation


def _parsers() -> list[argparse.ArgumentParser]:
    top = cli.parser()
    found = [top]
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += list(action.choices.values())
    return found


def _usage_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as raised:
        cli.parser().parse_args(argv)
    assert raised.value.code == 2
    return str(capsys.readouterr().err)


def test_version_prints_the_package_version_and_the_core(capsys, monkeypatch):
    with pytest.raises(SystemExit) as raised:
        cli.main(["--version"])
    assert raised.value.code == 0
    reason = load_core().reason  # "native", or "python (why)": the pure run's, a fallback's
    assert reason == "native" or reason.startswith("python (")
    assert capsys.readouterr().out == f"otel-userevents {__version__} (reader core: {reason})\n"
    monkeypatch.setenv(READER_CORE, "python")
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out == (
        f"otel-userevents {__version__} (reader core: python ({READER_CORE}=python))\n"
    )


def test_every_option_says_its_default():
    for sub in _parsers():
        for action in sub._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            assert action.help and "default" in action.help, (sub.prog, action.option_strings)


def test_format_has_help_naming_its_default(capsys):
    with pytest.raises(SystemExit):
        cli.main(["record", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "tree: spans as trace trees" in text and "(default: otlp-json)" in text


@pytest.mark.parametrize(
    ("argv", "bad"),
    [
        (["--prefix", "{}", "record"], "bad name!"),
        (["record", "--prefix", "{}"], "bad name!"),
        (["status", "--prefix", "{}"], "9lives"),
        (["hist", "--prefix", "{}"], "a-b"),
        (["decode", "x.dat", "--prefix", "{}"], "x" * 201),
    ],
)
def test_a_prefix_the_exporters_cannot_have_is_a_usage_error_naming_the_rule(argv, bad, capsys):
    def given(prefix: str) -> list[str]:
        return [prefix if word == "{}" else word for word in argv]

    for taken in ("_svc9", "x" * 200, "*"):  # what the exporters can have, and every prefix
        parsed = cli.parser().parse_args(given(taken))
        assert taken in (parsed.prefix, *(parsed.prefixes or ()))
    err = _usage_error(given(bad), capsys)
    assert "a prefix is letters, digits and '_', not a digit first, at most 200" in err


@pytest.mark.parametrize("command", ["record", "hist"])
@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_a_duration_that_is_not_more_than_zero_is_refused(command, value, capsys):
    err = _usage_error([command, "--duration", value], capsys)
    assert "seconds, more than 0" in err


def test_help_and_readme_give_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    readme = documentation()  # README.rst and docs/reader.rst
    for code, meaning in (("0", "done"), ("1", "runtime error"), ("2", "usage error"),
                          ("130", "interrupted")):  # fmt: skip
        assert re.search(rf"^  {code} +{meaning}", out, re.M), code
        assert re.search(rf"``{code}``\s+{meaning}", readme), code
    assert "otel-userevents --version" in readme


def test_a_runtime_error_exits_1_with_one_line(tmp_path, capsys):
    assert cli.main(["--tracefs", str(tmp_path / "none"), "status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("otel-userevents: ") and err.count("\n") == 1


def test_an_output_that_cannot_be_opened_exits_1(tmp_path, capsys):
    path = _capture(tmp_path, _pages(_records()[2]))
    assert cli.main(["decode", path, "-o", str(tmp_path / "no" / "such" / "dir")]) == 1
    assert "No such file or directory" in capsys.readouterr().err


def test_an_interrupt_exits_130(monkeypatch, capsys):
    def interrupted(args: argparse.Namespace, out: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(status_command, "status", interrupted)
    assert cli.main(["status"]) == 130
    assert capsys.readouterr().err == "otel-userevents: interrupted\n"


@pytest.mark.parametrize("command", [["record"], ["decode"]])
def test_help_suggests_only_installed_exporters(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = re.search(r"installed: ([^)]*)\)", text)
    assert listed is not None
    installed = set()
    for signal in ("traces", "logs", "metrics"):
        installed |= {e.name for e in entry_points(group=f"opentelemetry_{signal}_exporter")}
    names = listed.group(1).split(", ")
    assert names and set(names) <= installed and "user_events" not in names
    assert "otlp_proto_http" in names and "otlp" not in names


def test_decode_of_another_prefix_says_its_records_were_skipped(tmp_path, capsys):
    raws = _records()[2]  # otel's, and one record not ours (a sched_switch)
    path = _capture(tmp_path, _pages(raws))
    assert cli.main(["decode", path, "--prefix", "nosuch", "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert (
        f"{len(raws) - 1} records of other prefixes or providers skipped (see --prefix, --provider)"
        in err
    )
    assert "1 undecodable" in err  # the sched_switch record only
    assert "the file holds no tracepoints of ours (see --prefix)" in err


def test_decoding_workers_count_other_prefixes_alike():
    decoder = RecordDecoder(["nosuch"])
    add_formats(decoder, [text for system, text in FORMATS if system == MULTI])
    span_id = 301  # FORMATS' otel_span.1f
    raws = [record(span_id, b"\0" * 8), record(999, b"\0" * 8)]
    _, stats = decode_chunk(decoder, None, [page(1000, [data_event(0, r) for r in raws])])  # type: ignore[arg-type]
    assert stats.undecodable == 1 and stats.other_prefixes == 1  # an unknown id; another prefix


def test_output_to_dev_stdout_is_not_told_to_remove_it():
    with pytest.raises(PrivateFileError) as raised:
        open_private("/dev/stdout")
    message = str(raised.value)
    assert "remove it" not in message
    assert "standard output" in message and "give -o - or no output file" in message


@pytest.mark.parametrize(
    ("count", "seconds", "shown"),
    [
        (0, 10.0, "0/s"),
        (4, 10.0, "0.4/s"),
        (95, 10.0, "9.5/s"),
        (120, 10.0, "12/s"),
        (456_770, 10.0, "45,677/s"),
        (5, 0.0, "0/s"),
    ],  # fmt: skip
)
def test_rates_are_shown_as_precisely_as_useful(count, seconds, shown):
    assert rate(count, seconds) == shown


def _reader(rejected: list[str], enabled: dict[str, str]) -> SimpleNamespace:
    expression = "status_code == 2"
    return SimpleNamespace(
        filter=expression,
        filter_rejected={
            name: f"the kernel rejected filter {expression!r} for {name}: Field not found"
            for name in rejected
        },
        tracepoints=enabled,
        decoder=RecordDecoder(["otel"]),
    )


LEVELS = ("trace", "debug", "info", "warn", "error", "fatal")
NUMBER, HISTOGRAM = schema.METRIC_NUMBER, schema.METRIC_HISTOGRAM
METRICS = {"sum": NUMBER, "gauge": NUMBER, "histogram": HISTOGRAM, "exp_histogram": HISTOGRAM}
LOGS_AND_METRICS = [  # the log and metric tracepoints of a prefix, in both layouts
    *(f"otel_log_{level}.1f" for level in LEVELS),
    *(single_format_name(f"otel_log_{level}", schema.LOG) for level in LEVELS),
    *(f"otel_metric_{kind}.1f" for kind in METRICS),
    *(single_format_name(f"otel_metric_{kind}", shape) for kind, shape in METRICS.items()),
]


def test_a_rejected_filter_is_said_once_with_the_count_of_tracepoints_by_kind():
    reader = _reader(LOGS_AND_METRICS, {"user_events_multi/otel_span.1f": "span"})
    lines = filter_report(reader)  # type: ignore[arg-type]
    assert lines == [
        "the kernel rejected --filter 'status_code == 2' (Field not found) for 20 "
        "tracepoints (12 log, 8 metric): not recording them"
    ]


def test_a_few_rejected_tracepoints_are_named():
    reader = _reader(["otel_log_info.1f", "otel_log_warn.1f"], {"x/otel_span.1f": "span"})
    assert filter_report(reader) == [  # type: ignore[arg-type]
        "the kernel rejected --filter 'status_code == 2' (Field not found) for "
        "otel_log_info.1f, otel_log_warn.1f: not recording them"
    ]


def test_a_filter_that_fits_no_tracepoint_is_an_error():
    reader = _reader(LOGS_AND_METRICS + ["otel_span.1f"], {"x/otel_resource.1f": "resource"})
    said = (
        r"--filter 'status_code == 2' fits no tracepoint: "
        r"the kernel rejected .* for 21 tracepoints \(12 log, 8 metric, 1 span\)"
    )
    with pytest.raises(UsageError, match=said):
        filter_report(reader)  # type: ignore[arg-type]


class _RejectingReader(_FakeReader):
    """A reader whose kernel took the filter for the tracepoints in ``enabled`` only."""

    def __init__(self, filter: str, rejected: list[str], enabled: dict[str, str]) -> None:  # noqa: A002
        super().__init__([])
        self.filter = filter
        self.filter_rejected = {
            name: f"the kernel rejected filter {filter!r} for {name}: Field not found"
            for name in rejected
        }
        self.tracepoints = enabled


@pytest.mark.parametrize(
    ("enabled", "code"),
    [
        ({"x/otel_span.1f": "span", "x/otel_resource.1f": "resource"}, 0),
        ({"x/otel_resource.1f": "resource"}, 2),
    ],  # fmt: skip
)
def test_record_says_a_rejected_filter_once_and_stops_if_it_fits_nothing(
    monkeypatch, capsys, enabled, code
):
    reader = _RejectingReader("status_code == 2", LOGS_AND_METRICS, enabled)
    monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
    monkeypatch.setattr(record_command, "TraceReader", lambda *a, **k: reader)
    argv = ["record", "--filter", "status_code == 2", "--duration", "0.1",
            "--no-resource-detection", "--workers", "1"]  # fmt: skip
    assert cli.main(argv) == code
    err = capsys.readouterr().err
    assert err.count("rejected") == 1 and "Field not found" in err
    assert "for 20 tracepoints (12 log, 8 metric)" in err
    assert ("fits no tracepoint" in err) == (code == 2)


def test_a_spool_without_an_exporter_is_a_usage_error_before_tracefs(tmp_path, capsys):
    """``--spool`` keeps OTLP/HTTP requests: without ``--exporter`` it is refused at once,
    as a usage error, even where tracefs is missing (that would be a runtime error)."""
    argv = ["--tracefs", str(tmp_path / "none"), "record", "--spool", str(tmp_path / "s")]
    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    assert raised.value.code == 2
    assert "use it with --exporter" in capsys.readouterr().err
