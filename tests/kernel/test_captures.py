# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Captures made with the tools operators already use, decoded later: ``trace-cmd record``
of a running service (multi-format names included, which trace-cmd's own report cannot
parse), ``perf record`` of single-format tracepoints, and ``otel-userevents record
--capture``, which ``trace-cmd report`` reads too. Each decodes to exactly the OTLP/JSON the
app's own SDK encoding gives."""

from __future__ import annotations

import errno
import json
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.abi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.record.tracepoints import parse_tracepoint
from tests.support import kernel_support
from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

SINGLE_FORMAT = {"OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT": "false"}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian: apt-get install trace-cmd linux-perf)")
    return path


def _registered(tracefs, prefix: str) -> list[tuple[str, str]]:
    """(system, name) of the prefix's tracepoints."""
    return [
        (system, name)
        for system in (USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM)
        for name in tracefs.events(system)
        if (parsed := parse_tracepoint(name)) is not None and parsed.prefix == prefix
    ]


def _running_service(tracefs, prefix: str, *flags: str, env: dict[str, str] | None = None):
    """The short job as a long-running service: registered, waiting to be listened to."""
    app = proc.app(prefix, "checkout", "--wait-listened", *flags, env=env)
    # span, resource and the log classes (metric ones too, with a meter provider)
    assert wait_until(lambda: len(_registered(tracefs, prefix)) >= 7, 60), app
    return app


def _decode(path: Path, *args: str) -> tuple[list[dict], list[dict], str]:
    done = proc.otel_userevents("decode", str(path), "-o", str(path) + ".json", *args)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in Path(str(path) + ".json").read_text().splitlines()]
    spans = [x for x in lines if "resourceSpans" in x]
    return spans, [x for x in lines if "resourceLogs" in x], done.stderr


def _assert_equal_to_the_apps_own(
    result: dict, spans: list[dict], logs: list[dict], err: str
) -> None:
    want_spans = flatten([result["spans"]], "spans")
    assert len(want_spans) == 6 and flatten(spans, "spans") == want_spans, err
    want_logs = flatten([result["logs"]], "logs")
    assert len(want_logs) == 7 and flatten(logs, "logs") == want_logs, err


@pytest.mark.parametrize(
    ("options", "kind"),
    [((), "trace.dat v7, zstd"), (("--file-version", "6"), "trace.dat v6")],
    ids=["default-v7-zstd", "v6"],
)
def test_trace_cmd_record_of_a_running_service_decodes_to_the_apps_own_otlp(
    tracefs, prefix, tmp_path, kernel_has_multi_format, options, kind
):
    """trace-cmd 3.1.6 writes version 7, zstd-compressed, unless told otherwise."""
    trace_cmd = _tool("trace-cmd")
    app = _running_service(tracefs, prefix)
    system = USER_EVENTS_MULTI_SYSTEM if kernel_has_multi_format else USER_EVENTS_SYSTEM
    assert {s for s, _ in _registered(tracefs, prefix)} == {system}
    dat = tmp_path / "trace.dat"
    recording = proc.background(
        trace_cmd, "record", *options, "-e", f"{system}:{prefix}*", "-o", str(dat)
    )
    result = proc.finished(app)  # it writes once trace-cmd listens, then exits
    err = proc.stop(recording, codes=(0, 2))
    if recording.returncode == 2:  # trace-cmd's reset, after the kernel deleted the app's
        # tracepoints (and their system, when empty) once it exited: the data is written
        assert f"events/{system}/filter" in err and "data recorded" in err, err

    spans, logs, err = _decode(dat)
    _assert_equal_to_the_apps_own(result, spans, logs, err)
    assert f"({kind})" in err and "from checkout (13)" in err


def test_perf_record_of_single_format_tracepoints_decodes_to_the_apps_own_otlp(
    tracefs, prefix, tmp_path
):
    """perf (6.1) records only single-format tracepoints (it cannot parse a '.' in a name):
    on 6.9+ kernels that is OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT=false."""
    perf = _tool("perf")
    app = _running_service(tracefs, prefix, "--settle", "5", env=SINGLE_FORMAT)
    assert {s for s, _ in _registered(tracefs, prefix)} == {USER_EVENTS_SYSTEM}
    data = tmp_path / "perf.data"
    recording = proc.background(
        perf, "record", "-q", "-a", "-e", f"{USER_EVENTS_SYSTEM}:{prefix}*", "-o", str(data)
    )
    result = proc.finished(app)
    proc.stop(recording, codes=(0, -signal.SIGINT))  # perf ends by its own SIGINT

    spans, logs, err = _decode(data, "--prefix", prefix)
    _assert_equal_to_the_apps_own(result, spans, logs, err)
    assert "(perf.data)" in err and "from checkout (13)" in err


@pytest.mark.parametrize("layout", ["default", "single-format"])
def test_record_capture_keeps_pages_that_decode_later_and_trace_cmd_reads(
    tracefs, prefix, tmp_path, kernel_has_multi_format, layout
):
    trace_cmd = _tool("trace-cmd")
    capture = tmp_path / "capture.dat"
    reader, _ = proc.reader(tmp_path, "--prefix", prefix, "--capture", str(capture))
    env = SINGLE_FORMAT if layout == "single-format" else None
    result = proc.finished(proc.app(prefix, "checkout", env=env))  # no waiting: held
    err = proc.stop(reader)
    assert f"captured to {capture} (trace.dat v6), lost 0" in err

    spans, logs, decoded_err = _decode(capture)
    _assert_equal_to_the_apps_own(result, spans, logs, decoded_err)
    assert "from checkout (13)" in decoded_err

    report = subprocess.run(
        [trace_cmd, "report", "-i", str(capture)], capture_output=True, text=True, timeout=120
    )
    span_lines = [line for line in report.stdout.splitlines() if f"{prefix}_span" in line]
    if layout == "single-format" or not kernel_has_multi_format:
        assert report.returncode == 0, report.stderr
        assert len(span_lines) == 6, report.stdout[-3000:]
        names = {s["name"] for r in result["spans"]["resourceSpans"]
                 for ss in r["scopeSpans"] for s in ss["spans"]}  # fmt: skip
        for name in names:
            assert any(f" name={name} " in line for line in span_lines), name
    else:  # libtraceevent cannot parse multi-format names (pinned in test_tools.py)
        assert span_lines == [] and "[UNKNOWN EVENT]" in report.stdout


def test_record_capture_to_an_unwritable_destination_removes_its_instance_and_keeps_the_spools(
    tracefs, prefix, tmp_path
):
    """The trace.dat cannot be written (its path became a directory): the instance is gone
    from tracefs all the same, the pages stay in their spools, and the one-line error says
    how to make the trace.dat from them, which then decodes to the app's own OTLP."""
    capture = tmp_path / "capture.dat"
    reader, _ = proc.reader(tmp_path, "--prefix", prefix, "--capture", str(capture))
    instance = (tmp_path / "ready-0").read_text()
    assert instance in tracefs.instances()
    capture.mkdir()  # the destination is unwritable from now on
    result = proc.finished(proc.app(prefix, "checkout"))
    err = proc.after_ready(proc.stop(reader, codes=(1,)))

    assert instance not in tracefs.instances()  # no service pays for a listener that is gone
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"otel-userevents: could not write {capture}: Is a directory; "), err
    (spool_dir,) = tmp_path.glob(".capture-*")
    assert f"pages kept in {spool_dir}; make the trace.dat with: cat " in err
    spools = sorted(p.name for p in spool_dir.iterdir())
    assert "header" in spools and any(name.startswith("cpu") for name in spools), spools

    command = err.split("make the trace.dat with: ", 1)[1].strip()
    remade = tmp_path / "remade.dat"
    files = shlex.split(command.split(" > ", 1)[0])[1:]
    remade.write_bytes(b"".join(Path(name).read_bytes() for name in files))
    spans, logs, decoded_err = _decode(remade)
    _assert_equal_to_the_apps_own(result, spans, logs, decoded_err)


def test_record_capture_on_a_full_file_system_removes_its_instance_and_names_the_spools(
    tracefs, prefix, tmp_path
):
    """The file system of the capture and its spools fills up while it runs: the reader
    exits 1 with one line naming the spools, no traceback, and its instance is gone."""
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(full)], check=True)
    try:
        capture = full / "capture.dat"
        reader, _ = proc.reader(tmp_path, "--prefix", prefix, "--capture", str(capture))
        instance = (tmp_path / "ready-0").read_text()
        assert instance in tracefs.instances()
        proc.finished(proc.app(prefix, "checkout"))
        with open(full / "filler", "wb", buffering=0) as filler:  # until the disk is full
            try:
                while filler.write(bytes(4096)):
                    pass
            except OSError as error:
                assert error.errno == errno.ENOSPC
        err = proc.after_ready(proc.stop(reader, codes=(1,)))

        assert instance not in tracefs.instances()
        assert "Traceback" not in err and err.count("\n") == 1, err
        (spool_dir,) = full.glob(".capture-*")
        assert "No space left on device; " in err and f"pages kept in {spool_dir}" in err, err
        assert not capture.exists()
    finally:
        kernel_support.unmount(str(full))


def test_trace_cmd_before_the_app_stops_at_once_as_the_readme_says(
    tracefs, prefix, tmp_path, kernel_has_multi_format
):
    """docs/reader.rst's "Other tools" says to start the app first: with no tracepoint of the prefix
    yet, trace-cmd's glob enables nothing and it stops with the message README quotes; the
    same line once the app runs records it (the test above decodes that)."""
    trace_cmd = _tool("trace-cmd")
    system = USER_EVENTS_MULTI_SYSTEM if kernel_has_multi_format else USER_EVENTS_SYSTEM
    assert _registered(tracefs, prefix) == []
    done = subprocess.run(
        [trace_cmd, "record", "-e", f"{system}:{prefix}_*", "-o", str(tmp_path / "t.dat")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    said = f"No events enabled with {system}:{prefix}_*"
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert said in done.stdout + done.stderr, (done.stdout, done.stderr)
    readme = (Path(__file__).resolve().parents[2] / "docs" / "reader.rst").read_text("utf-8")
    assert "Start\nthe app first" in readme
    assert "No events enabled with user_events_multi:otel_*" in readme
