# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The exporters on a real kernel: what reaches the tracepoints, and when nothing is done."""

import logging
import os
import struct
import subprocess
import sys
import threading

import pytest
from opentelemetry.sdk.trace import TracerProvider

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
    log_exporter,
    span_exporter,
)
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD, PERF_MAX_PAYLOAD
from opentelemetry_exporter_userevents.record import anyvalue, flags
from opentelemetry_exporter_userevents.record.schema import LOG, RESOURCE, SPAN
from tests.support.app_tracepoints import register_as_exporter
from tests.support.kernel_support import PerfTracepoint, drop_privileges, in_child
from tests.support.records import check_log, check_span, plain, same
from tests.support.span_fixtures import RESOURCE as APP_RESOURCE
from tests.support.span_fixtures import make_logs, make_spans

pytestmark = pytest.mark.kernel


@pytest.fixture
def span_exporter_(prefix):
    exporter = UserEventsSpanExporter(prefix=prefix)
    yield exporter
    exporter.shutdown()


def perf_on(tracefs, registration):
    return PerfTracepoint(tracefs.event_id(registration.system, registration.tracepoint))


def decoded(tracefs, registration, samples, schema_):
    fmt = tracefs.read_format(registration.system, registration.tracepoint)
    return [schema_.unpack(raw, fmt) for raw in samples]


def test_spans_reach_the_kernel_field_by_field(span_exporter_, tracefs, attach):
    exporter = span_exporter_
    resource_registration = exporter._writer.registrations["resource"]
    spans_perf = perf_on(tracefs, exporter.registration)
    resource_perf = perf_on(tracefs, resource_registration)
    attach(exporter.registration)
    try:
        spans = make_spans(UserEventsSpanProcessor(exporter))
        records = decoded(tracefs, exporter.registration, spans_perf.samples(), SPAN)
        resources = decoded(tracefs, resource_registration, resource_perf.samples(), RESOURCE)
    finally:
        spans_perf.close()
        resource_perf.close()

    assert len(records) == len(spans) == 2
    (resource,) = resources
    assert same(anyvalue.decode(resource["attributes"]), plain(APP_RESOURCE.attributes))
    assert resource["schema_url"] == APP_RESOURCE.schema_url
    by_id = {record["span_id"]: record for record in records}
    for span in spans:
        check_span(by_id[f"{span.context.span_id:016x}"], span, resource["resource_id"])
    assert exporter.stats.written == 3 and exporter.stats.dropped_detached == 0
    text = "\n".join(attach.lines(exporter.registration))
    assert "name=SELECT users" in text and "status_description=connection reset" in text


def test_logs_reach_the_kernel_field_by_field(prefix, tracefs):
    exporter = UserEventsLogExporter(prefix=prefix)
    perfs = {cls: perf_on(tracefs, reg) for cls, reg in exporter.registrations.items()}
    try:
        logs = make_logs(UserEventsLogRecordProcessor(exporter))
        by_class = {
            cls: decoded(tracefs, exporter.registrations[cls], perf.samples(), LOG)
            for cls, perf in perfs.items()
        }
    finally:
        for perf in perfs.values():
            perf.close()
        exporter.shutdown()

    assert {cls: len(records) for cls, records in by_class.items()} == {
        "trace": 4, "debug": 4, "info": 5, "warn": 4, "error": 4, "fatal": 4
    }  # fmt: skip
    # Two records can share an observed time under emulation: order by severity too.
    records = sorted(
        (r for rs in by_class.values() for r in rs),
        key=lambda r: (r["observed_time_ns"], r["severity_number"]),
    )
    logs = sorted(logs, key=lambda readable: (
        readable.log_record.observed_timestamp,
        readable.log_record.severity_number.value if readable.log_record.severity_number else 0,
    ))  # fmt: skip
    for record, readable in zip(records, logs, strict=True):
        check_log(record, readable, records[0]["resource_id"])
    assert records[0]["trace_id"] != "0" * 32, "ids come from the record, not the context"


def test_only_listened_severity_classes_are_encoded(prefix, tracefs, monkeypatch):
    calls = []
    real = log_exporter.encode_log
    monkeypatch.setattr(log_exporter, "encode_log", lambda *a: calls.append(1) or real(*a))
    exporter = UserEventsLogExporter(prefix=prefix)
    error = perf_on(tracefs, exporter.registrations["error"])
    fatal = perf_on(tracefs, exporter.registrations["fatal"])
    try:
        make_logs(UserEventsLogRecordProcessor(exporter))
        samples = error.samples() + fatal.samples()
    finally:
        error.close()
        fatal.close()
        exporter.shutdown()

    assert len(calls) == 8, "only severities 17..24 were serialized"
    assert len(samples) == 8
    assert exporter.stats.written == 8, "no resource record: its tracepoint has no listener"


def test_nothing_is_encoded_while_nobody_listens(span_exporter_, tracefs, monkeypatch):
    calls = []
    real = span_exporter.encode_span
    monkeypatch.setattr(span_exporter, "encode_span", lambda *a: calls.append(1) or real(*a))
    exporter = span_exporter_
    processed = UserEventsSpanExporter(prefix=exporter.config.prefix)  # shut down by make_spans

    spans = make_spans(UserEventsSpanProcessor(processed))  # the enable-bit-first processor
    exporter.export(spans)  # the path a batch processor takes
    detached = (len(calls), processed.stats.not_listened, exporter.stats.not_listened)
    perf = perf_on(tracefs, exporter.registration)
    try:
        exporter.export(spans)
        samples = perf.samples()
    finally:
        perf.close()

    assert detached == (0, 0, 2), "no encoding while detached; export counts what it skipped"
    assert len(calls) == 2 and len(samples) == 2


def test_listener_detaching_before_the_write_counts_a_drop(span_exporter_, tracefs, monkeypatch):
    exporter = span_exporter_
    perf = perf_on(tracefs, exporter.registration)
    real = span_exporter.encode_span

    def encode_then_detach(*args):
        result = real(*args)
        perf.close()  # the last listener goes away between the check and the write
        return result

    monkeypatch.setattr(span_exporter, "encode_span", encode_then_detach)
    spans = make_spans()

    result = exporter.export(spans[:1])

    assert result.name == "SUCCESS"
    assert exporter.stats.dropped_detached == 1 and exporter.stats.written == 0


def _largest_kept(write, limit=20000):
    low, high = 4, limit
    while low < high:
        middle = (low + high + 1) // 2
        if write(middle):
            low = middle
        else:
            high = middle - 1
    return low


def test_record_size_limits_of_ftrace_and_perf(data, event_name, tracefs, attach):
    """Oversized records vanish silently, so the limits the exporters use are measured."""
    registration = data.register(f"{event_name} u32 n")
    attach(registration)
    trace = os.path.join(tracefs.path, "instances", attach.instance, "trace")

    def ftrace_keeps(size):
        open(trace, "w").close()
        registration.write(struct.pack("<I", size) + b"x" * (size - 4))
        return len(attach.lines(registration)) == 1

    ftrace_limit = _largest_kept(ftrace_keeps)
    for system, name in attach.attached:
        tracefs.set_enabled(system, name, False, attach.instance)

    def perf_keeps(size):
        perf = perf_on(tracefs, registration)
        try:
            registration.write(struct.pack("<I", size) + b"x" * (size - 4))
            return len(perf.samples()) == 1
        finally:
            perf.close()

    perf_limit = _largest_kept(perf_keeps)

    assert ftrace_limit == FTRACE_MAX_PAYLOAD == 4064
    assert perf_limit == PERF_MAX_PAYLOAD == 8184


def test_oversized_span_arrives_cut_with_markers(prefix, tracefs, attach):
    exporter = UserEventsSpanExporter(prefix=prefix)
    attach(exporter.registration)
    provider = TracerProvider()
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("big") as span:
        for i in range(40):
            span.set_attribute(f"attr{i}", "v" * 200)
    lines = attach.lines(exporter.registration)
    exporter.shutdown()

    assert exporter.stats.truncated == 1 and exporter.stats.written == 1
    (line,) = lines
    assert f"truncated={flags.TRUNCATED_ATTRIBUTES}" in line or "truncated=(1)" in line, line
    assert "name=big" in line


def _emit_spans(provider, count, name):
    tracer = provider.get_tracer("t")
    for _ in range(count):
        with tracer.start_as_current_span(name):
            pass


def test_spans_flow_from_a_child_forked_after_setup(span_exporter_, tracefs, attach):
    exporter = span_exporter_
    provider = TracerProvider()
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    attach(exporter.registration)

    pid = os.fork()
    if pid == 0:
        try:
            _emit_spans(provider, 5, "from-child")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    _emit_spans(provider, 2, "from-parent")

    lines = attach.lines(exporter.registration)
    child = [line for line in lines if "name=from-child" in line]
    assert len(child) == 5 and all(f"-{pid} " in line for line in child)
    assert len([line for line in lines if "name=from-parent" in line]) == 2


def test_spans_flow_from_many_threads(span_exporter_, attach):
    exporter = span_exporter_
    provider = TracerProvider()
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    attach(exporter.registration)

    threads = [threading.Thread(target=_emit_spans, args=(provider, 50, f"t{i}")) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    lines = attach.lines(exporter.registration)
    assert exporter.stats.written == 400
    assert len(lines) == 400
    for i in range(8):
        assert sum(f"name=t{i} " in line for line in lines) == 50


def test_same_schema_in_two_processes_is_one_tracepoint(
    span_exporter_, prefix, kernel_has_multi_format
):
    code = (
        "from opentelemetry_exporter_userevents import UserEventsSpanExporter as E\n"
        f"print(E(prefix={prefix!r}).registration.tracepoint)"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert other.stdout.strip() == span_exporter_.registration.tracepoint
    if kernel_has_multi_format:
        assert span_exporter_.registration.tracepoint.startswith(f"{prefix}_span.")
    else:  # one name per schema version
        assert span_exporter_.registration.tracepoint == f"{prefix}_span_{SPAN.version}"


ENTRY_POINT_APP = """
import logging
from opentelemetry import trace, _logs
from opentelemetry.sdk._configuration import _OTelSDKConfigurator
_OTelSDKConfigurator().configure()
with trace.get_tracer("e2e").start_as_current_span("from-entry-point"):
    _logs.get_logger("e2e").emit(body="log from entry point",
                                 severity_number=_logs.SeverityNumber.ERROR)
trace.get_tracer_provider().shutdown()
_logs.get_logger_provider().shutdown()
"""


CONFIG_FILE = """
file_format: "1.0"
tracer_provider:
  processors:
    - simple: {exporter: {user_events: {prefix: PREFIX, resource_interval_millis: 5000}}}
logger_provider:
  processors:
    - simple: {exporter: {user_events: {prefix: PREFIX}}}
"""


@pytest.mark.parametrize("path", ["environment", "config_file"])
def test_entry_point_configuration_end_to_end(prefix, data, tracefs, attach, tmp_path, path):
    """OTEL_TRACES_EXPORTER=user_events, or a declarative config file naming user_events with
    YAML keys, through the SDK's own configurator."""
    listened_span = register_as_exporter(data, f"{prefix}_span", SPAN)
    listened_log = register_as_exporter(data, f"{prefix}_log_error", LOG)
    attach(listened_span)
    attach(listened_log)
    env = dict(os.environ, OTEL_METRICS_EXPORTER="none")
    if path == "environment":
        env.update(OTEL_TRACES_EXPORTER="user_events", OTEL_LOGS_EXPORTER="user_events",
                   OTEL_EXPORTER_USER_EVENTS_PREFIX=prefix)  # fmt: skip
    else:  # the prefix reaches the exporter only as a YAML key
        config = tmp_path / "otel.yaml"
        config.write_text(CONFIG_FILE.replace("PREFIX", prefix))
        env["OTEL_CONFIG_FILE"] = str(config)

    subprocess.run([sys.executable, "-c", ENTRY_POINT_APP], env=env, check=True, timeout=120)

    (span_line,) = attach.lines(listened_span)
    (log_line,) = attach.lines(listened_log)
    assert "name=from-entry-point" in span_line
    assert 'body="log from entry point"' in log_line


def test_without_rights_the_exporter_is_a_quiet_no_op(prefix):
    def as_nobody():
        drop_privileges()
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("opentelemetry_exporter_userevents").addHandler(handler)
        exporter = UserEventsSpanExporter(prefix=prefix)
        second = UserEventsSpanExporter(prefix=prefix)
        provider = TracerProvider()
        provider.add_span_processor(UserEventsSpanProcessor(exporter))
        _emit_spans(provider, 3, "unheard")
        result = second.export(make_spans())
        return [len(records), records[0].getMessage(), result.name, exporter.stats.snapshot()]

    warnings, message, result, stats = in_child(as_nobody)

    assert warnings == 1, "one warning per process"
    assert "no permission" in message and "export nothing" in message
    assert result == "SUCCESS"
    assert set(stats.values()) == {0}


CONFIGURATOR_APP = """
import sys
from opentelemetry import trace
tracer = trace.get_tracer("e2e")
with tracer.start_as_current_span("before-attach"):
    pass
print("ready", flush=True)
sys.stdin.readline()
with tracer.start_as_current_span("after-attach"):
    pass
(processor,) = trace.get_tracer_provider()._active_span_processor._span_processors
print(type(processor).__name__, processor.exporter.stats.written, flush=True)
"""


def test_instrument_with_the_user_events_configurator_writes_once_listened(prefix, data, attach):
    """opentelemetry-instrument with OTEL_PYTHON_CONFIGURATOR=user_events: nothing is
    written while detached, and the first span after a listener attaches is."""
    listened = register_as_exporter(data, f"{prefix}_span", SPAN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_PYTHON_CONFIGURATOR="user_events", OTEL_TRACES_EXPORTER="user_events",
               OTEL_METRICS_EXPORTER="none", OTEL_EXPORTER_USER_EVENTS_PREFIX=prefix)  # fmt: skip
    instrument = os.path.join(os.path.dirname(sys.executable), "opentelemetry-instrument")
    with subprocess.Popen(
        [instrument, sys.executable, "-c", CONFIGURATOR_APP],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as app:  # fmt: skip
        assert app.stdout.readline().strip() == "ready"
        attach(listened)
        output, _ = app.communicate("go\n", timeout=120)

    assert output.split() == ["UserEventsSpanProcessor", "1"]
    (line,) = attach.lines(listened)
    assert "name=after-attach" in line
