# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsLoggingHandler without a kernel: nothing is built while the severity class is
unheard; listened, the record equals the SDK LoggingHandler's field by field."""

import logging
import os
import subprocess
import sys
import warnings

import pytest
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents import UserEventsLogExporter
from opentelemetry_exporter_userevents._export import writer
from opentelemetry_exporter_userevents.logging_handler import UserEventsLoggingHandler


@pytest.fixture(autouse=True)
def fresh_warning(monkeypatch):
    monkeypatch.setattr(writer, "_warned_unavailable", False)


def pipeline():
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource({"service.name": "s"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    return provider, memory


def logger_with(handler, name):
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger


def test_unheard_severity_builds_nothing(tmp_path, monkeypatch):
    provider, memory = pipeline()
    handler = UserEventsLoggingHandler(UserEventsLogExporter(tracefs=str(tmp_path)),
                                       logger_provider=provider)  # fmt: skip
    monkeypatch.setattr(handler, "_translate", lambda record: pytest.fail("translated"))
    logger_with(handler, "unheard").warning("hello %s", "x")
    assert memory.get_finished_logs() == ()


def test_listened_record_equals_the_sdk_handlers(tmp_path):
    ours_provider, ours = pipeline()
    sdk_provider, sdk = pipeline()
    handler = UserEventsLoggingHandler(UserEventsLogExporter(tracefs=str(tmp_path)),
                                       logger_provider=ours_provider)  # fmt: skip
    word = memoryview(bytearray(b"\1\0\0\0")).cast("I")
    handler._any_class, handler._enable = word, [word] * 25
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        sdk_handler = LoggingHandler(logger_provider=sdk_provider)
    record = logging.LogRecord("app", logging.ERROR, "/p.py", 7, "boom %d", (3,), None, "f")
    record.custom = "c"
    handler.handle(record)
    sdk_handler.handle(record)
    (mine,) = ours.get_finished_logs()
    (theirs,) = sdk.get_finished_logs()
    a, b = mine.log_record, theirs.log_record
    for field in ("timestamp", "trace_id", "span_id", "trace_flags", "severity_text",
                  "severity_number", "body", "event_name"):  # fmt: skip
        assert getattr(a, field) == getattr(b, field), field
    assert dict(a.attributes) == dict(b.attributes)
    assert a.body == "boom 3" and a.attributes["custom"] == "c"
    assert mine.instrumentation_scope == theirs.instrumentation_scope
    assert mine.resource == theirs.resource


SHOW_HANDLERS = """
import logging
from opentelemetry_exporter_userevents.configurator import UserEventsConfigurator
UserEventsConfigurator().configure()
print(*sorted(type(h).__name__ for h in logging.getLogger().handlers))
"""


@pytest.mark.parametrize(
    ("exporters", "expected"),
    [("user_events", "UserEventsLoggingHandler"), ("user_events,console", "LoggingHandler")],
)
def test_configurator_installs_it_when_every_log_exporter_is_user_events(
    tmp_path, exporters, expected
):
    env = dict(
        os.environ,
        OTEL_EXPORTER_USER_EVENTS_TRACEFS=str(tmp_path),
        OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED="true",
        OTEL_TRACES_EXPORTER="none",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER=exporters,
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", SHOW_HANDLERS],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert out == [expected, "_StderrHandler"]  # the app's console output kept beside it
