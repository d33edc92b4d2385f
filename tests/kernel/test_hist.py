# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents hist``: the kernel counts spans per name and status (with their total
duration) and logs per severity, exactly as written, in both layouts, with no record read;
and what a hist trigger does to an event nobody enabled."""

from __future__ import annotations

import io
import os
import signal
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.abi import UserEventsData
from opentelemetry_exporter_userevents.reader.hist.collector import (
    HIST_INSTANCE_PREFIX,
    TRIGGERS,
    HistCollector,
)
from opentelemetry_exporter_userevents.reader.hist.hist_file import MergedHistogram, parse_hist
from opentelemetry_exporter_userevents.reader.hist.view import render
from opentelemetry_exporter_userevents.record.tracepoints import LOG_KIND, SPAN_KIND
from tests.support.kernel_support import wait_until

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parent.parent.parent
ODD = "a, status_code: 9 } hitcount: 1"
"""A span name that looks like the rest of a hist row: rows are read from their right end."""
SPANS = [
    ("checkout", StatusCode.ERROR, 3_000_017),
    ("checkout", StatusCode.ERROR, 5_000_001),
    ("checkout", StatusCode.OK, 1_234),
    ("item 0", StatusCode.UNSET, 7),
    ("item 0", StatusCode.UNSET, 0),
    (ODD, StatusCode.OK, 11),
    ("", StatusCode.UNSET, 5),
]
LOGS = [9, 9, 9, 13, 17, 10, 1, 24]


def _write(prefix: str, multi_format: bool | None) -> None:
    """SPANS and LOGS through the exporters, each span with its exact duration."""
    resource = Resource({"service.name": "hist-test"})
    tracer_provider = TracerProvider(resource=resource)
    span_exporter = UserEventsSpanExporter(prefix=prefix, multi_format=multi_format)
    tracer_provider.add_span_processor(UserEventsSpanProcessor(span_exporter))
    logger_provider = LoggerProvider(resource=resource)
    log_exporter = UserEventsLogExporter(prefix=prefix, multi_format=multi_format)
    logger_provider.add_log_record_processor(UserEventsLogRecordProcessor(log_exporter))
    tracer = tracer_provider.get_tracer("hist.test")
    logger = logger_provider.get_logger("hist.test")
    start = time.time_ns()
    for name, code, duration in SPANS:
        span = tracer.start_span(name, start_time=start)
        if code != StatusCode.UNSET:
            span.set_status(Status(code))
        span.end(end_time=start + duration)
    for number in LOGS:
        logger.emit(severity_number=SeverityNumber(number), body="x")
    tracer_provider.shutdown()
    logger_provider.shutdown()


def _expected_spans(times: int) -> dict[tuple[str, int], tuple[int, int]]:
    expected: dict[tuple[str, int], tuple[int, int]] = {}
    for name, code, duration in SPANS:
        count, total = expected.get((name, code.value), (0, 0))
        expected[(name, code.value)] = (count + times, total + times * duration)
    return expected


def test_the_kernel_counts_spans_by_name_and_status_and_logs_by_severity_in_both_layouts(
    tracefs, prefix, kernel_has_multi_format
):
    with HistCollector(tracefs, [prefix], rescan_interval=0.1) as collector:
        _write(prefix, None)  # multi-format where the kernel has it
        _write(prefix, False)  # the single-format fallback
        collector.scan()
        result = collector.read()
        in_buffer = _entries_written(tracefs, collector.instance)
    assert result.problems == {}
    spans, logs = result.tables[(prefix, SPAN_KIND)], result.tables[(prefix, LOG_KIND)]
    got = {key: (v["hitcount"], v["duration_ns"]) for key, v in spans.rows.items()}
    assert got == _expected_spans(2)
    assert spans.hits == 2 * len(SPANS) and spans.dropped == 0
    # both layouts on a multi-format kernel; else single-format (held and written alike)
    systems = {where.split("/")[0] for where, kind in collector.tracepoints.items()}
    assert systems == (
        {"user_events_multi", "user_events"} if kernel_has_multi_format else {"user_events"}
    )
    severities: Counter[int] = Counter()
    for (scope, severity), values in logs.rows.items():
        assert '"name":"hist.test"' in str(scope)
        severities[int(severity)] += values["hitcount"]
    assert severities == Counter({n: 2 * c for n, c in Counter(LOGS).items()})
    assert in_buffer == 0  # a trigger alone kept nothing in the instance's buffer
    assert not [i for i in tracefs.instances() if i.startswith(HIST_INSTANCE_PREFIX)]


def _entries_written(tracefs, instance: str) -> int:
    total = 0
    for cpu in tracefs.cpus(instance):
        stats = tracefs.cpu_stats(instance, cpu)
        total += stats["entries"] + stats["overrun"]
    return total


def _hist_command(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "hist",
         "--ready-file", str(ready), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    if not wait_until(lambda: ready.exists() and bool(ready.read_text()), 60):
        process.kill()
        raise AssertionError(process.communicate()[1])
    return process, ready


def test_the_hist_command_prints_what_the_kernel_counted(
    tracefs, prefix, tmp_path, kernel_has_multi_format
):
    other = prefix + "b"
    process, ready = _hist_command(
        tmp_path, "--prefix", prefix, "--prefix", other, "--duration", "15"
    )
    instance = ready.read_text()
    assert instance.startswith(HIST_INSTANCE_PREFIX) and instance in tracefs.instances()
    _write(prefix, None)
    out, err = process.communicate(timeout=90)
    assert process.returncode == 0, err
    assert "stopped (duration)" in err and "not counted" not in err
    lines = out.splitlines()
    held = "2 tracepoints" if kernel_has_multi_format else "1 tracepoint"  # both layouts held
    assert lines[:2] == [f"prefix {prefix}", f"  spans: {len(SPANS)} counted in {held}"]
    assert f"prefix {other}\n  spans: 0 counted in {held}\n" in out
    rows = {tuple(line.split()[-5:]) for line in lines if line.startswith("    ")}
    for (name, code), (count, total) in _expected_spans(1).items():
        status = {0: "unset", 1: "ok", 2: "error"}[code]
        cells = (status, str(count), f"{total / 1e6:.3f}", f"{total / count / 1e6:.3f}")
        assert any(row[1:] == cells for row in rows), (name, cells, out)
    assert any(line.startswith(f"    {ODD}  ") for line in lines), out
    assert "  logs: 8 counted in " in out
    assert "    INFO (9)  " in out and out.split("    INFO (9)  ")[1].split("\n")[0].endswith(" 3")
    assert instance not in tracefs.instances()


def test_hist_of_every_prefix_counts_a_job_that_writes_at_once_and_exits(tracefs, prefix, tmp_path):
    """``hist --prefix '*'`` cannot hold a prefix it does not know: the job announces itself,
    the collector sets its triggers (and listens to its other tracepoints) at once, and the
    kernel counts every span and log from the first."""
    process, _ = _hist_command(tmp_path, "--prefix", "*")
    job = f"{prefix}job"
    app = subprocess.run(
        [sys.executable, "-m", "tests.support.short_app", job, f"{prefix}-job"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert app.returncode == 0, app.stderr
    assert "did not listen" not in app.stderr
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    section = out.split(f"prefix {job}\n", 1)[1]
    assert section.startswith("  spans: 6 counted in "), out
    assert "  logs: 7 counted in " in section.split("\nprefix ", 1)[0], out


def test_ctrl_c_prints_and_cleans_up_and_a_killed_ones_instance_goes_at_the_next_start(
    tracefs, prefix, tmp_path
):
    killed, ready = _hist_command(tmp_path, "--prefix", prefix)
    stale = ready.read_text()
    killed.kill()
    killed.communicate()
    assert stale in tracefs.instances()  # its triggers are still set there
    ready.unlink()
    process, ready = _hist_command(tmp_path, "--prefix", prefix)
    assert stale not in tracefs.instances()
    _write(prefix, None)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "stopped (interrupted)" in err
    assert f"  spans: {len(SPANS)} counted" in out
    assert ready.read_text() not in tracefs.instances()


def test_a_trigger_alone_counts_an_event_nobody_enabled_and_a_bad_one_says_why(tracefs, prefix):
    data = UserEventsData(tracefs.path)
    registration = data.register(f"{prefix}_x u64 duration_ns; __rel_loc char[] name", flags=0)
    system, name = registration.system, registration.tracepoint
    assert name is not None
    instance = f"{prefix}_hist"
    tracefs.create_instance(instance)
    trigger = "hist:keys=name:vals=hitcount,duration_ns"
    try:
        with pytest.raises(ValueError, match="Couldn't find field.*nosuch"):
            tracefs.set_trigger(system, name, "hist:keys=nosuch", instance)
        assert not registration.enabled
        tracefs.set_trigger(system, name, trigger, instance)
        with pytest.raises(ValueError, match="already exists"):
            tracefs.set_trigger(system, name, trigger, instance)
        assert registration.enabled  # soft mode: the writer sees a listener
        enable = Path(tracefs.event_dir(system, name, instance), "enable").read_text()
        assert enable.strip() == "0*"
        for text, duration in ((b"a\0", 5), (b"a\0", 6), (b"b c\0", 7)):
            registration.write(struct.pack("<QI", duration, len(text) << 16) + text)
        table = parse_hist(tracefs.read_hist(system, name, instance), {"name"})
        assert {e.keys["name"]: e.values["duration_ns"] for e in table.entries} == {
            "a": 11, "b c": 7,
        }  # fmt: skip
        assert _entries_written(tracefs, instance) == 0
        tracefs.remove_trigger(system, name, trigger, instance)
        assert not registration.enabled
        assert tracefs.read_hist(system, name, instance) == ""
    finally:
        tracefs.remove_instance(instance)
        data.close()
    assert TRIGGERS[SPAN_KIND].text.startswith("hist:keys=name,status_code:vals=hitcount,")


EVIL = b"bad\n\x1b]0;pwned\x07\x1b[2J\xc2\x9bname"
"""A name with a line break, an OSC retitle, a CSI clear and a C1 CSI (UTF-8)."""
FORGED = b"x, status_code: 1 } hitcount: 999  duration_ns: 1\n{ name: y"
"""A name holding a whole row's ending on a line of its own."""


def test_a_name_with_a_line_break_and_escapes_costs_only_its_own_row(tracefs, prefix):
    """The kernel prints a text key's raw bytes, line breaks and escapes included; the
    other writers' rows are still read, and the table is shown escaped."""
    data = UserEventsData(tracefs.path)
    registration = data.register(
        f"{prefix}_n u64 duration_ns; u32 status_code; __rel_loc char[] name", flags=0
    )
    system, name = registration.system, registration.tracepoint
    assert name is not None
    instance = f"{prefix}_hist_names"
    tracefs.create_instance(instance)
    trigger = TRIGGERS[SPAN_KIND].text
    try:
        tracefs.set_trigger(system, name, trigger, instance)
        rows = [(b"checkout", 2, 5), (b"checkout", 2, 6), (b"item 0", 0, 7)]
        rows += [(EVIL, 2, 9), (FORGED, 0, 4)]
        for text, status, duration in rows:
            text += b"\0"
            registration.write(struct.pack("<QII", duration, status, len(text) << 16) + text)
        raw = tracefs.read_hist(system, name, instance)
        assert "{ name: bad\n\x1b]0;pwned\x07\x1b[2J\x9bname " in raw  # as written
        table = parse_hist(raw, TRIGGERS[SPAN_KIND].text_keys)
    finally:
        tracefs.remove_instance(instance)
        data.close()
    got = {(e.keys["name"], e.keys["status_code"]): e.values for e in table.entries}
    assert got[("checkout", 2)] == {"hitcount": 2, "duration_ns": 11}
    assert got[("item 0", 0)] == {"hitcount": 1, "duration_ns": 7}
    assert got[(EVIL.decode(), 2)] == {"hitcount": 1, "duration_ns": 9}  # its lines joined
    # the forged row's two parts: one made up, then the real count under the rest
    assert got[("x", 1)] == {"hitcount": 999, "duration_ns": 1}
    assert got[("y", 0)] == {"hitcount": 1, "duration_ns": 4}
    assert (table.totals.entries, table.skipped, table.surplus) == (4, 0, 1)
    merged = MergedHistogram(table.key_fields, table.value_fields)
    merged.add(table)
    out = io.StringIO()
    render({(prefix, SPAN_KIND): merged}, out)
    shown = out.getvalue()
    assert not {"\x1b", "\x07", "\x9b"} & set(shown), shown
    assert "1 row more than the kernel counted" in shown
    assert "\n    bad\\n\\x1b]0;pwned\\x07\\x1b[2J\\u009bname  " in shown


@pytest.fixture(autouse=True)
def _no_stray_instance(tracefs):
    yield
    for name in tracefs.instances():
        if name.startswith(HIST_INSTANCE_PREFIX) and not os.environ.get("KEEP"):
            try:
                tracefs.remove_instance(name)
            except OSError:
                pass
