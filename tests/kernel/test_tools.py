# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Cross-checks with tools nobody here wrote: the kernel's ``trace`` text, trace-cmd and
perf show the same values as the reader. Debian 12's trace-cmd 3.1.6 and perf 6.1 decode
the single-format fallback, but not multi-format tracepoint names (pinned below)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys

import pytest

from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi import UserEventsData
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.reader import TraceReader
from opentelemetry_exporter_userevents.record import schema
from tests.support.kernel_support import wait_until
from tests.support.span_fixtures import make_spans

pytestmark = pytest.mark.kernel

TEXTS = ("trace_id", "span_id", "parent_span_id", "name", "status_description", "trace_state",
         "attributes", "events", "links", "scope")  # fmt: skip


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian: apt-get install trace-cmd linux-perf)")
    return path


def _version(tool: str) -> str:
    return subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip()


WRITE_ONCE = """
import sys
from opentelemetry_exporter_userevents.abi import UserEventsData
registration = UserEventsData().register(sys.argv[1], flags=0)
registration.write(bytes.fromhex(sys.argv[2]))
"""


def _trace_cmd_instance(tracefs, registration) -> str:
    """Record through an instance of trace-cmd's own: ``trace-cmd extract -B`` removes
    the instance it extracted (trace-cmd 3.1.6)."""
    instance = "tc_" + hashlib.blake2b(registration.tracepoint.encode(), digest_size=6).hexdigest()
    tracefs.create_instance(instance)
    tracefs.set_enabled(registration.system, registration.tracepoint, True, instance)
    return instance


def _extract(trace_cmd: str, instance: str, tmp_path) -> str:
    dat = tmp_path / "trace.dat"
    subprocess.run([trace_cmd, "extract", "-B", instance, "-o", str(dat)], check=True,
                   capture_output=True)  # fmt: skip
    return subprocess.run(
        [trace_cmd, "report", "-i", str(dat)], capture_output=True, text=True
    ).stdout


def _expected_fields(values: dict) -> list[str]:
    """``name=value`` as trace-cmd and perf print fields (integers in decimal)."""
    return [f"{field.name}={values[field.name]}" for field in schema.SPAN.fields]


def test_trace_cmd_perf_and_trace_text_show_the_readers_values_on_the_single_format_fallback(
    tracefs, prefix, attach, tmp_path
):
    trace_cmd, perf = _tool("trace-cmd"), _tool("perf")
    data = UserEventsData()
    registration = data.register(schema.SPAN.command(f"{prefix}_span"), flags=0)
    name = registration.tracepoint
    span = make_spans()[0]
    payload, _ = encode_span(span, 0xABC, FTRACE_MAX_PAYLOAD)
    perf_data = tmp_path / "perf.data"
    with TraceReader(tracefs, prefix) as reader:
        attach(registration)
        instance = _trace_cmd_instance(tracefs, registration)
        # perf enables its events when the workload execs: the workload writes the record.
        recording = subprocess.run(
            [perf, "record", "-q", "-e", f"user_events:{name}", "-a", "-o", str(perf_data),
             "--", sys.executable, "-c", WRITE_ONCE, registration.command, payload.hex()],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert recording.returncode == 0, recording.stderr
        records = []
        assert wait_until(lambda: records.extend(reader.read()) or records, 10)
    reported = _extract(trace_cmd, instance, tmp_path)
    scripted = subprocess.run(
        [perf, "script", "-i", str(perf_data)], capture_output=True, text=True, check=True
    ).stdout
    (trace_line,) = attach.lines(registration)

    (record,) = records
    values = record.values
    assert values["span_id"] == f"{span.context.span_id:016x}" and values["resource_id"] == 0xABC
    for tool, text in (("trace-cmd", reported), ("perf", scripted)):
        lines = [x for x in text.splitlines() if f"{name}:" in x]
        assert len(lines) == 1, (tool, text)
        (line,) = lines
        for expected in _expected_fields(values):
            assert f" {expected} " in line + " ", (tool, expected, line)
    for field in TEXTS:  # the kernel's own text: strings as they are, integers as 0x.. (N)
        assert f" {field}={values[field]} " in trace_line + " ", field
    assert f" start_time_ns={values['start_time_ns']:#x} ({values['start_time_ns']}) " in trace_line


@pytest.mark.multi_format
def test_stock_tools_do_not_decode_multi_format_names(tracefs, prefix, tmp_path):
    """Pinned so the README's tool table stays true: if a newer tool decodes these, this
    test fails and the table gets updated."""
    trace_cmd, perf = _tool("trace-cmd"), _tool("perf")
    data = UserEventsData()
    registration = data.register(schema.SPAN.command(f"{prefix}_span"))
    assert registration.system == "user_events_multi"
    payload, _ = encode_span(make_spans()[0], 1, FTRACE_MAX_PAYLOAD)
    instance = _trace_cmd_instance(tracefs, registration)
    assert wait_until(lambda: registration.enabled, 10)
    registration.write(payload)

    reported = _extract(trace_cmd, instance, tmp_path)
    perf_record = subprocess.run(
        [perf, "record", "-q", "-e", f"user_events_multi:{registration.tracepoint}", "-a",
         "-o", str(tmp_path / "perf.data"), "--", "true"],
        capture_output=True, text=True,
    )  # fmt: skip

    assert "3.1.6" in _version(trace_cmd) and "6.1." in _version(perf)
    assert "[UNKNOWN EVENT]" in reported
    assert registration.tracepoint not in reported
    assert perf_record.returncode != 0
