# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader on a real kernel: what applications wrote comes back exactly, loss is
counted, filters run in the kernel, and the reader cleans up after itself."""

from __future__ import annotations

import codecs
import importlib
import io
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time

import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi import USER_EVENTS_MULTI_SYSTEM, UserEventsData
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.reader import ReaderError, TraceReader, cli
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.live.trace_reader import INSTANCE_PREFIX
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json
from opentelemetry_exporter_userevents.reader.outputs.output import OtlpJsonOutput
from opentelemetry_exporter_userevents.record import schema
from tests.support.kernel_support import drop_privileges, in_child, wait_until
from tests.support.otlp import flatten
from tests.support.sdk_rebuild import SdkRebuilder
from tests.support.span_fixtures import make_spans

pytestmark = pytest.mark.kernel

# Every value type OTLP carries (the value encoding carries more; OTLP drops those).
VALUES = {
    "str": "GET /checkout",
    "int": -(2**63),
    "float": 0.5,
    "nan": float("nan"),
    "bool": False,
    "bytes": b"\x00\xff",
    "none": None,
    "list": (1, "a", 2.5, True, None),
    "map": {"nested": {"deep": [1, {"k": b"v"}]}},
    "unicode": "żółć 🚀",
    "nul": "a\x00b",
}


class Pipe:
    """A one-way signal between forked processes."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()

    def send(self, data: bytes = b".") -> None:
        os.write(self.w, data)

    def receive(self, size: int = 65536, timeout: float = 60.0) -> bytes:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.r], [], [], 0.2)
            if ready:
                return os.read(self.r, size)
        raise AssertionError("no signal from the other process")


def _providers(prefix: str, service: str):
    resource = Resource({"service.name": service, "host.name": "h", "process.pid": os.getpid()})
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer_provider.add_span_processor(
        UserEventsSpanProcessor(UserEventsSpanExporter(prefix=prefix))
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    logger_provider.add_log_record_processor(
        UserEventsLogRecordProcessor(UserEventsLogExporter(prefix=prefix))
    )
    return tracer_provider, logger_provider, spans, logs


def _app_child(prefix: str, carrier: dict[str, str]) -> dict:
    """Process B: a client span under A's span (a remote parent), and a log at every
    severity. Returns the OTLP/JSON of what its SDK handed to the exporters."""
    tracer_provider, logger_provider, spans, logs = _providers(prefix, "inventory")
    tracer = tracer_provider.get_tracer("inventory.db", "2.0", attributes={"db": "pg"})
    logger = logger_provider.get_logger("inventory.log", "2.0")
    context = TraceContextTextMapPropagator().extract(carrier)
    with tracer.start_as_current_span(
        "SELECT stock", context=context, kind=SpanKind.CLIENT
    ) as span:
        span.set_status(Status(StatusCode.ERROR, "deadlock"))
        span.record_exception(RuntimeError("deadlock detected"))
        for number in range(1, 25):
            logger.emit(
                severity_number=SeverityNumber(number),
                severity_text=SeverityNumber(number).name,
                body={"n": number, "text": f"log {number}"} if number % 2 else f"log {number}",
                attributes={"n": number, "list": (1, 2)},
                event_name="inventory.check" if number % 5 == 0 else None,
            )
        logger.emit(body="unset severity")
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return {
        "spans": otlp_json.spans_request(spans.get_finished_spans()),
        "logs": otlp_json.logs_request(logs.get_finished_logs()),
    }


def _app(prefix: str, ready: Pipe | None = None, go: Pipe | None = None) -> dict:
    """Process A: a server span with events, links and every value type, whose child
    runs in process B. Waits for ``go`` (after saying ``ready``) before any span starts."""
    tracer_provider, logger_provider, spans, logs = _providers(prefix, "checkout")
    if ready is not None and go is not None:
        ready.send()
        go.receive()
    tracer = tracer_provider.get_tracer(
        "checkout.http", "1.0", schema_url="https://opentelemetry.io/schemas/1.26.0"
    )
    linked = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    with tracer.start_as_current_span(
        "POST /checkout",
        kind=SpanKind.SERVER,
        attributes=VALUES,
        links=[Link(linked, {"link.kind": "follows"})],
    ) as span:
        span.add_event("cart loaded", {"items": 3, "ids": (1, 2, 3)})
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        child = in_child(lambda: _app_child(prefix, carrier), timeout=120)
        logger_provider.get_logger("checkout.log").emit(
            severity_number=SeverityNumber.INFO, body="order placed", attributes=VALUES
        )
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return {
        "spans": [otlp_json.spans_request(spans.get_finished_spans()), child["spans"]],
        "logs": [otlp_json.logs_request(logs.get_finished_logs()), child["logs"]],
    }


def _read_all(reader: TraceReader, join_stage: JoinStage, until, timeout: float = 60.0):
    """Read until ``until(items)`` holds; return the rebuilt items."""
    items: list = []
    deadline = time.monotonic() + timeout
    while True:
        items += join_stage.add(reader.read())
        if until(items) or time.monotonic() > deadline:
            return items
        time.sleep(0.1)


def _requests(items) -> tuple[list[dict], list[dict]]:
    """What the reader's OTLP/JSON output writes for ``items``, parsed back."""
    out = io.StringIO()
    OtlpJsonOutput(out).write(items)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return [x for x in lines if "resourceSpans" in x], [x for x in lines if "resourceLogs" in x]


def _run_app_with_reader_after(tracefs, prefix) -> tuple[TraceReader, dict]:
    """Fork the app; start the reader once it has registered, then let it run."""
    ready, go, out = Pipe(), Pipe(), Pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(out.w, json.dumps(_app(prefix, ready, go)).encode() + b"\n")
        finally:
            os._exit(0)
    ready.receive()
    reader = TraceReader(tracefs, prefix, rescan_interval=0.1).start()
    try:
        kinds = sorted(reader.tracepoints.values())
        assert kinds.count("span") >= 1 and kinds.count("resource") >= 1
        assert kinds.count("log") >= 6  # every severity class
        go.send()
        chunks = [out.receive(timeout=180)]
        while not chunks[-1].endswith(b"\n"):
            chunks.append(out.receive(timeout=60))
        os.waitpid(pid, 0)
    except BaseException:
        reader.close()
        raise
    return reader, json.loads(b"".join(chunks))


@pytest.mark.parametrize("reader_starts", ["before the app", "after the app"])
def test_reader_rebuilds_a_two_process_trace_and_logs_as_the_apps_own_otlp_json(
    tracefs, prefix, reader_starts
):
    if reader_starts == "before the app":
        reader = TraceReader(tracefs, prefix, rescan_interval=0.1).start()
        try:
            result = in_child(lambda: _app(prefix), timeout=180)
        except BaseException:
            reader.close()
            raise
    else:
        reader, result = _run_app_with_reader_after(tracefs, prefix)
    try:
        items = _read_all(reader, JoinStage(), lambda items: len(items) >= 2 + 26)
    finally:
        reader.close()

    got_spans, got_logs = _requests(items)
    want_spans = flatten(result["spans"], "spans")
    want_logs = flatten(result["logs"], "logs")
    assert len(want_spans) == 2 and len(want_logs) == 26
    assert flatten(got_spans, "spans") == want_spans
    assert flatten(got_logs, "logs") == want_logs
    assert reader.lost == 0 and reader.decoder.stats.undecodable == 0
    assert not any(name.startswith(INSTANCE_PREFIX) for name in tracefs.instances())


def _write_spans(prefix: str, count: int, **span_options) -> dict:
    tracer_provider = TracerProvider(resource=Resource({"service.name": "load"}))
    exporter = UserEventsSpanExporter(prefix=prefix, resource_interval_millis=3_600_000)
    tracer_provider.add_span_processor(UserEventsSpanProcessor(exporter))
    tracer = tracer_provider.get_tracer("load")
    for number in range(count):
        with tracer.start_as_current_span(f"span {number}", attributes={"n": number}) as span:
            if number % 3 == 0:
                span.set_status(Status(StatusCode.ERROR, "bad"))
    return exporter.stats.snapshot()


def test_reported_loss_equals_the_real_loss_with_a_tiny_buffer(tracefs, prefix):
    with TraceReader(tracefs, prefix, buffer_size_kb=8) as reader:
        reader.scan()
        written = in_child(lambda: _write_spans(prefix, 400))["written"]
        records = []
        while batch := reader.read():
            records += batch

    assert written == 401  # 400 spans and one resource announcement
    assert reader.lost > 0, "the buffer was meant to overflow"
    assert len(records) + reader.lost == written
    numbers = [int(r.values["name"].split()[1]) for r in records if r.kind == "span"]
    assert numbers == sorted(numbers) and numbers[-1] == 399  # the newest survive


def test_two_readers_at_once_each_get_every_record(tracefs, prefix):
    with TraceReader(tracefs, prefix) as first, TraceReader(tracefs, prefix) as second:
        assert first.instance != second.instance
        in_child(lambda: _write_spans(prefix, 30))
        rebuilt = []
        for reader in (first, second):
            rebuilt.append(
                _read_all(reader, SdkRebuilder(), lambda items: len(items) >= 30, timeout=30)
            )

    assert [len(r) for r in rebuilt] == [30, 30]
    assert [s.name for s in rebuilt[0]] == [s.name for s in rebuilt[1]]
    assert first.lost == second.lost == 0


def test_kernel_filter_keeps_only_matching_spans_and_skips_tracepoints_without_the_field(
    tracefs, prefix
):
    with TraceReader(tracefs, prefix, filter="status_code == 2") as reader:
        assert any(name.startswith(f"{prefix}_log_info") for name in reader.filter_rejected)
        assert not any("_log_" in name for name in reader.tracepoints)
        in_child(lambda: _write_spans(prefix, 30))
        spans = _read_all(reader, SdkRebuilder(), lambda items: len(items) >= 10, timeout=30)
        # No sleep: every writev returned before in_child did, and a returned write is in
        # the buffer, so this read drains whatever else the filter let through.
        spans += SdkRebuilder().add(reader.read())

    assert [s.name for s in spans] == [f"span {n}" for n in range(0, 30, 3)]
    assert all(s.status.status_code is StatusCode.ERROR for s in spans)
    assert reader.decoder.stats.records == 10 + 1  # ten errors and the resource


def test_new_format_version_appearing_mid_stream_is_picked_up_by_its_offsets(tracefs, prefix):
    data = UserEventsData()
    # hold=False: the reader finds versions as they appear, rather than holding them
    with TraceReader(tracefs, prefix, rescan_interval=0, hold=False) as reader:
        assert reader.tracepoints == {}
        # A future schema: one more field, placed first, so every known field moves.
        command = (
            f"{prefix}_span u32 future; " + schema.SPAN.command(f"{prefix}_span").split(" ", 1)[1]
        )
        registration = data.register(command)
        assert wait_until(lambda: (reader.read() or True) and registration.enabled, 10)
        span = make_spans()[0]
        payload, _ = encode_span(span, 7, FTRACE_MAX_PAYLOAD)
        registration.write(struct.pack("<I", 0xABCD), payload)
        records = []
        assert wait_until(lambda: records.extend(reader.read()) or records, 10)

    (record,) = records
    assert record.tracepoint == registration.tracepoint
    assert record.values["span_id"] == f"{span.context.span_id:016x}"
    assert record.values["resource_id"] == 7
    assert json.loads(record.values["scope"])["name"] == span.instrumentation_scope.name


def _cli(*args: str, **options) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


def _our_instances(tracefs) -> list[str]:
    return [name for name in tracefs.instances() if name.startswith(INSTANCE_PREFIX)]


def _start_cli(tracefs, prefix, tmp_path, *args: str) -> subprocess.Popen:
    ready = tmp_path / "ready"
    process = _cli("--prefix", prefix, "record", "--ready-file", str(ready), *args)
    assert wait_until(lambda: ready.exists() and ready.read_text(), 60), process.stderr
    return process


def test_cli_records_otlp_json_and_a_summary_and_cleans_up_on_sigint(tracefs, prefix, tmp_path):
    output = tmp_path / "out.jsonl"
    process = _start_cli(
        tracefs, prefix, tmp_path, "--output", str(output), "--rescan-interval", "0.1"
    )
    assert len(_our_instances(tracefs)) == 1
    in_child(lambda: _write_spans(prefix, 5))
    assert wait_until(lambda: output.exists() and "span 4" in output.read_text(), 30)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)

    assert process.returncode == 0, err
    assert "stopped (interrupted)" in err and "5 spans and 0 logs rebuilt" in err
    assert "lost 0" in err
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    names = [
        span["name"]
        for line in lines
        for rs in line["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    assert names == [f"span {n}" for n in range(5)]
    assert _our_instances(tracefs) == []


def test_cli_tree_view_and_status(tracefs, prefix, tmp_path, kernel_has_multi_format):
    output = tmp_path / "tree.txt"
    process = _start_cli(tracefs, prefix, tmp_path, "--format", "tree", "-o", str(output))
    status = _cli("--prefix", prefix, "status", "--verbose")  # each tracepoint
    status_out, _ = status.communicate(timeout=60)
    brief, _ = _cli("--prefix", prefix, "status").communicate(timeout=60)  # a line a prefix
    in_child(lambda: _write_spans(prefix, 2))
    assert wait_until(lambda: output.read_text().count("trace ") == 2, 30)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    out = output.read_text()

    if kernel_has_multi_format:
        assert f"user_events_multi/{prefix}_span." in status_out
    else:
        assert f"user_events/{prefix}_span_{schema.SPAN.version}" in status_out
    assert "listeners: ftrace (instance otel-userevents." in status_out
    (line,) = [x for x in brief.splitlines() if x.startswith(f"prefix {prefix}: ")]
    assert " tracepoints, " in line and "; listeners: ftrace (instance otel-userevents." in line
    assert process.returncode == 0, err
    assert "span 0  internal" in out and "[ERROR: bad]" in out
    assert "load" in out


def test_cli_re_exports_through_an_installed_exporter(tracefs, prefix, tmp_path):
    process = _start_cli(tracefs, prefix, tmp_path, "--exporter", "console", "--duration", "6")
    in_child(lambda: _write_spans(prefix, 2))
    out, err = process.communicate(timeout=60)

    assert process.returncode == 0, err
    printed = [json.loads(x) for x in _json_objects(out)]
    assert sorted(s["name"] for s in printed) == ["span 0", "span 1"]
    assert all(s["resource"]["attributes"]["service.name"] == "load" for s in printed)


def _json_objects(text: str) -> list[str]:
    """The top-level JSON objects ConsoleSpanExporter printed one after another."""
    decoder, position, found = json.JSONDecoder(), 0, []
    text = text.strip()
    while position < len(text):
        _, end = decoder.raw_decode(text, position)
        found.append(text[position:end])
        position = end
        while position < len(text) and text[position].isspace():
            position += 1
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_instance_is_removed_on_sigterm_and_after_sigkill_at_the_next_start(
    tracefs, prefix, tmp_path, signum
):
    process = _start_cli(tracefs, prefix, tmp_path)
    (instance,) = _our_instances(tracefs)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)

    if signum == signal.SIGTERM:
        assert process.returncode == 0 and "stopped (SIGTERM)" in err
        assert _our_instances(tracefs) == []
    else:
        assert _our_instances(tracefs) == [instance]
        # its instance still listens: what an app writes now goes there, and nobody reads it
        written = in_child(lambda: _write_spans(prefix, 20))["written"]
        with TraceReader(tracefs, prefix) as reader:
            assert reader.removed_stale == [instance]
            assert reader.tracefs_instance.unread_in_stale == written > 0  # counted lost
        assert _our_instances(tracefs) == []


def test_reader_without_rights_says_what_it_needs(tracefs, prefix):
    def as_nobody():
        codecs.lookup("ascii")  # the interpreter's own files are unreadable once nobody
        drop_privileges()
        try:
            TraceReader(tracefs, prefix).start()
        except ReaderError as error:
            return str(error)
        return "started"

    message = in_child(as_nobody)
    assert message.startswith("permission denied") and "root" in message


def test_cli_without_rights_exits_with_a_clear_error(tracefs, prefix):
    def as_nobody():
        codecs.lookup("ascii")  # the interpreter's own files are unreadable once nobody
        cli.parser().parse_args(["record"])
        importlib.import_module(f"{cli.__package__}.commands.record")  # cli loads it in main
        importlib.import_module("opentelemetry.exporter.otlp.proto.common")  # for find_spec
        drop_privileges()
        sys.stderr = io.StringIO()
        code = cli.main(["--prefix", prefix, "record", "--duration", "1"])
        return code, sys.stderr.getvalue()

    code, err = in_child(as_nobody)

    assert code == 1
    assert err.startswith("otel-userevents: permission denied") and "root" in err


def test_single_format_fallback_reads_the_same_values_as_the_kernels_own_trace_text(
    tracefs, prefix, attach
):
    data = UserEventsData()
    registration = data.register(schema.SPAN.command(f"{prefix}_span"), flags=0)
    assert registration.system == "user_events"
    span = make_spans()[0]  # the child span, with an error status
    payload, _ = encode_span(span, 0x1234, FTRACE_MAX_PAYLOAD)
    with TraceReader(tracefs, prefix) as reader:
        assert f"user_events/{prefix}_span" in reader.tracepoints
        attach(registration)
        assert wait_until(lambda: registration.enabled, 10)
        registration.write(payload)
        records = []
        assert wait_until(lambda: records.extend(reader.read()) or records, 10)
    (line,) = attach.lines(registration)

    (record,) = records
    values = record.values
    assert values["status_code"] == 2 and values["name"] == span.name
    for name in ("trace_id", "span_id", "parent_span_id", "name", "attributes", "scope"):
        assert f" {name}={values[name]} " in line + " ", name
    for name in ("start_time_ns", "duration_ns", "resource_id"):
        assert f" {name}={values[name]:#x} ({values[name]}) " in line + " ", name
    assert f" status_code=({values['status_code']}) " in line + " "
    assert USER_EVENTS_MULTI_SYSTEM not in line
