# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the reader prints for a person reads safely on a terminal: a span, log or metric
whose every text holds an OSC title change, a CSI screen clear, a C1 CSI and a newline,
shown by the tree view, the ``hist`` tables and ``status``, reaches the output with no raw
ESC, BEL, C1 control or line break inside a line."""

from __future__ import annotations

import argparse
import io

import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics.export import AggregationTemporality, NumberDataPoint
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.commands import status as status_command
from opentelemetry_exporter_userevents.reader.hist.collector import TRIGGERS
from opentelemetry_exporter_userevents.reader.hist.hist_file import (
    HistEntry,
    Histogram,
    MergedHistogram,
    Totals,
)
from opentelemetry_exporter_userevents.reader.hist.view import render
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint
from opentelemetry_exporter_userevents.reader.outputs.exporters.tree_view import TreeView
from opentelemetry_exporter_userevents.reader.terminal_text import cut, printable
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.tracepoints import LOG_KIND, SPAN_KIND

EVIL = "a\x1b]0;pwned\x07b\x1b[2Jc\x9bd\ne\u202ef"
"""OSC retitle (ESC ] ... BEL), CSI clear (ESC [ 2 J), C1 CSI, newline, right-to-left
override."""
UNSAFE = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def assert_safe(text: str, lines: int | None = None) -> None:
    """No character a terminal acts on; ``lines`` lines if given (no newline inside one)."""
    for char in UNSAFE:
        assert char not in text, (char, text)
    assert all(c.isprintable() for c in text.replace("\n", "")), text
    if lines is not None:
        assert text.count("\n") == lines, text


def test_printable_escapes_what_a_terminal_acts_on_and_cut_counts_escapes():
    assert printable(EVIL) == "a\\x1b]0;pwned\\x07b\\x1b[2Jc\\u009bd\\ne\\u202ef"
    assert printable("plain é 漢字 ok") == "plain é 漢字 ok"
    assert cut(EVIL, 6) == "a\\x1b…"
    assert_safe(cut(EVIL, 6))


def _span_and_log() -> tuple[object, object]:
    resource = Resource({"service.name": EVIL, EVIL: EVIL})
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    with tracer_provider.get_tracer(EVIL).start_as_current_span(
        EVIL, attributes={EVIL: EVIL, "list": [EVIL, EVIL]}
    ) as span:
        span.add_event(EVIL, {EVIL: EVIL})
        span.set_status(Status(StatusCode.ERROR, EVIL))
        logger_provider.get_logger(EVIL).emit(
            severity_number=SeverityNumber.ERROR,
            severity_text=EVIL,
            body=EVIL,
            attributes={EVIL: EVIL},
            event_name=EVIL,
        )
    return spans.get_finished_spans()[0], logs.get_finished_logs()[0]


def test_the_tree_view_escapes_every_text_of_spans_logs_and_metrics():
    span, log = _span_and_log()
    point = MetricPoint(
        resource=Resource({"service.name": EVIL}),
        scope=None,
        name=EVIL,
        description=EVIL,
        unit=EVIL,
        kind=mv.KIND_SUM,
        temporality=AggregationTemporality.CUMULATIVE,
        monotonic=True,
        point=NumberDataPoint({EVIL: EVIL}, 0, 1, 3),
    )
    out = io.StringIO()
    view = TreeView(out)
    view.add([span, log, point])  # type: ignore[list-item]
    view.flush()
    text = out.getvalue()
    # the trace line, the span, its event, the log line, the metric line
    assert_safe(text, lines=5)
    assert "a\\x1b]0;pwned\\x07b" in text  # shown escaped, not dropped
    assert "[ERROR: a\\x1b]0;pwned" in text  # the status description
    assert f"  {printable(EVIL)}  " in text.splitlines()[0] + "  "  # the service name
    assert f"  [{printable(EVIL)}]  " in text  # the log's event name


QUOTED = '"' + EVIL
"""Not the JSON a plain-text field starting with ``"`` should be: shown as it is."""
SCOPE = '{"name":"' + EVIL.replace("\n", "\\n") + '","version":""}'
"""An instrumentation scope's JSON, whose name is shown."""


def test_hist_tables_escape_names_scopes_and_prefixes():
    spans = MergedHistogram(TRIGGERS[SPAN_KIND].keys, ("hitcount", "duration_ns"))
    logs = MergedHistogram(TRIGGERS[LOG_KIND].keys, ("hitcount",))
    span_trigger, log_trigger = TRIGGERS[SPAN_KIND], TRIGGERS[LOG_KIND]
    spans.add(
        Histogram(
            span_trigger.text,
            span_trigger.keys,
            ("hitcount", "duration_ns"),
            (
                HistEntry({"name": EVIL, "status_code": 2}, {"hitcount": 1, "duration_ns": 5}),
                HistEntry(
                    {"name": '"' + EVIL, "status_code": 7}, {"hitcount": 1, "duration_ns": 5}
                ),
            ),
            Totals(2, 2, 0),
            span_trigger.text_keys,
        )
    )
    logs.add(
        Histogram(
            log_trigger.text,
            log_trigger.keys,
            ("hitcount",),
            (
                HistEntry({"scope": EVIL, "severity_number": 9}, {"hitcount": 1}),
                HistEntry({"scope": SCOPE, "severity_number": 99}, {"hitcount": 1}),
            ),
            Totals(2, 2, 0),
            log_trigger.text_keys,
        )
    )  # fmt: skip
    out = io.StringIO()
    render({(EVIL, SPAN_KIND): spans, (EVIL, LOG_KIND): logs}, out)
    text = out.getvalue()
    assert_safe(text, lines=9)  # prefix, 2 × (summary, header, 2 rows)
    assert "a\\x1b]0;pwned\\x07b" in text


class _HostileTracefs:
    """What ``status`` reads from tracefs, every text hostile: the mount point,
    user_events_status, instance names and a format file the kernel refused to parse."""

    path = "/sys/kernel/tracing" + EVIL

    def status(self) -> str:
        return f"otel_span.1 # Used by ftrace perf{EVIL.replace(chr(10), '')}\n{EVIL}\n"

    def instances(self) -> list[str]:
        return [EVIL]

    def events(self, system: str) -> list[str]:
        return ["otel_span.1"] if system == "user_events_multi" else ["otel_log_info"]

    def read_format(self, system: str, name: str) -> object:
        if system == "user_events_multi":
            raise ValueError(EVIL)  # gone
        raise AssertionError("not reached")

    def event_dir(self, system: str, name: str, instance: str | None = None) -> str:
        raise OSError(EVIL)


def test_status_escapes_what_it_reads_from_tracefs(monkeypatch):
    tracefs = _HostileTracefs()
    monkeypatch.setattr(status_command, "tracefs_of", lambda args: tracefs)
    monkeypatch.setattr(status_command, "check_user_events", lambda tracefs: None)

    def describe(tracefs: object, system: str, name: str, decoder: object) -> str:
        return f"multi-format, not our schema ({EVIL})"

    monkeypatch.setattr(status_command, "_describe", describe)
    out = io.StringIO()
    args = argparse.Namespace(tracefs=None, prefix=None, prefixes=["otel"], verbose=True)
    assert status_command.status(args, out) == 0
    text = out.getvalue()
    assert_safe(text, lines=6)  # tracefs, prefix, 2 × (tracepoint, listeners)
    assert "perfa\\x1b]0;pwned" in text  # a listener named by user_events_status
    brief = io.StringIO()
    args.verbose = False
    assert status_command.status(args, brief) == 0
    assert_safe(brief.getvalue(), lines=2)  # tracefs, the prefix's line
    assert "perfa\\x1b]0;pwned" in brief.getvalue()


def test_cli_errors_quoting_a_file_are_escaped(monkeypatch, capsys):
    def fail(args: argparse.Namespace, out: object) -> int:
        raise ValueError(f"bad format file: {EVIL}")

    monkeypatch.setattr(status_command, "status", fail)
    assert cli.main(["status"]) == 1
    err = capsys.readouterr().err
    assert_safe(err, lines=1)
    assert err.startswith("otel-userevents: bad format file: a\\x1b]0;pwned")


@pytest.mark.parametrize("text", [EVIL, "\x00\x7f\x80\x9f\u2028\u2029\u200e\U000e0001"])
def test_printable_leaves_no_control_character(text: str):
    assert_safe(printable(text), lines=0)
