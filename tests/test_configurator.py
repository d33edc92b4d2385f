# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OTEL_PYTHON_CONFIGURATOR=user_events: which processors opentelemetry-instrument installs,
from environment variables and from a configuration file (no kernel needed)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.configurator import with_processors

needs_configuration = pytest.mark.skipif(
    importlib.util.find_spec("opentelemetry.configuration") is None,
    reason="opentelemetry-configuration is not installed (it pins the newest SDK, so CI's "
    "oldest-SDK environment has none)",
)

INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"

# Prints the processors of the global providers, each with its exporter's settings.
SHOW_PROCESSORS = """
import json
from opentelemetry import trace, _logs

def describe(processor):
    exporter = getattr(processor, "exporter", None) or getattr(processor, "span_exporter", None)
    if exporter is None:
        batch = getattr(processor, "_batch_processor", None)
        exporter = getattr(batch, "_exporter", None)
    config = getattr(exporter, "config", None)
    return [type(processor).__name__, type(exporter).__name__, getattr(config, "prefix", None)]
spans = trace.get_tracer_provider()._active_span_processor._span_processors
logs = _logs.get_logger_provider()._multi_log_record_processor._log_record_processors
def data_file(processor):
    exporter = getattr(processor, "exporter", None) or getattr(processor, "span_exporter", None)
    return getattr(getattr(exporter, "config", None), "user_events_data", None)
print(json.dumps({"spans": [describe(p) for p in spans], "logs": [describe(p) for p in logs],
                  "data": [data_file(p) for p in [*spans, *logs]]}))
"""


def instrumented(tmp_path, **variables):
    """Run SHOW_PROCESSORS under opentelemetry-instrument; user_events is unavailable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_PYTHON_CONFIGURATOR="user_events",
        OTEL_METRICS_EXPORTER="none",
        OTEL_EXPORTER_USER_EVENTS_TRACEFS=str(tmp_path),  # no user_events_data: a no-op
        **variables,
    )
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, "-c", SHOW_PROCESSORS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_environment_path_installs_the_enable_bit_first_processors(tmp_path):
    shown, _ = instrumented(
        tmp_path,
        OTEL_TRACES_EXPORTER="user_events,console",
        OTEL_LOGS_EXPORTER="user_events",
        OTEL_EXPORTER_USER_EVENTS_PREFIX="svc",
    )

    assert shown["spans"] == [
        ["UserEventsSpanProcessor", "UserEventsSpanExporter", "svc"],
        ["BatchSpanProcessor", "ConsoleSpanExporter", None],
    ]
    assert shown["logs"] == [["UserEventsLogRecordProcessor", "UserEventsLogExporter", "svc"]]


CONFIG_FILE = """
file_format: "1.0"
tracer_provider:
  processors:
    - batch: {exporter: {user_events: {prefix: from_yaml}}}
    - simple: {exporter: {console: {}}}
logger_provider:
  processors:
    - simple: {exporter: {user_events: {prefix: from_yaml_logs}}}
"""


@needs_configuration
def test_configuration_file_path_installs_the_enable_bit_first_processors(tmp_path):
    config = tmp_path / "otel.yaml"
    config.write_text(CONFIG_FILE)

    shown, stderr = instrumented(tmp_path, OTEL_CONFIG_FILE=str(config))

    assert shown["spans"] == [
        ["SimpleSpanProcessor", "ConsoleSpanExporter", None],
        ["UserEventsSpanProcessor", "UserEventsSpanExporter", "from_yaml"],
    ]
    assert shown["logs"] == [
        ["UserEventsLogRecordProcessor", "UserEventsLogExporter", "from_yaml_logs"]
    ]
    assert "ignoring configurator kwargs" not in stderr


CONFIG_FILE_WITH_DATA_FILE = """
file_format: "1.0"
tracer_provider:
  processors:
    - batch: {exporter: {user_events: {user_events_data: /run/user_events/user_events_data}}}
logger_provider:
  processors:
    - simple: {exporter: {user_events: {}}}
"""


@needs_configuration
def test_configuration_file_key_names_the_data_file(tmp_path):
    """A container's data file, from the configuration file's ``user_events_data`` key; an
    exporter without the key keeps the environment's (none here)."""
    config = tmp_path / "otel.yaml"
    config.write_text(CONFIG_FILE_WITH_DATA_FILE)

    shown, stderr = instrumented(tmp_path, OTEL_CONFIG_FILE=str(config))

    assert shown["data"] == ["/run/user_events/user_events_data", None]
    assert "ignoring unknown options" not in stderr


def test_other_exporters_keep_the_processor_a_distribution_chose(tmp_path):
    kwargs = with_processors(
        {
            "export_span_processor": SimpleSpanProcessor,
            "export_log_record_processor": SimpleLogRecordProcessor,
            "sampler": None,
        }
    )
    user_events = UserEventsSpanExporter(tracefs=str(tmp_path))
    user_events_logs = UserEventsLogExporter(tracefs=str(tmp_path))

    spans = kwargs["export_span_processor"]
    logs = kwargs["export_log_record_processor"]

    assert type(spans(user_events)) is UserEventsSpanProcessor
    assert type(spans(ConsoleSpanExporter())) is SimpleSpanProcessor
    assert type(logs(user_events_logs)) is UserEventsLogRecordProcessor
    assert type(logs(ConsoleLogRecordExporter())) is SimpleLogRecordProcessor
    assert kwargs["sampler"] is None


SHOW_ROOT_HANDLERS = """
import logging, warnings
warnings.simplefilter("error")  # a warning at configuration would have failed it
print(*sorted(type(h).__name__ for h in logging.getLogger().handlers))
"""


def root_handlers(tmp_path, python_path="", warned=False, **variables):
    """The root logger's handlers after opentelemetry-instrument ran our configurator (and,
    if ``warned``, whether the SDK warned about the variable)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_PYTHON_CONFIGURATOR="user_events",
        OTEL_METRICS_EXPORTER="none",
        OTEL_EXPORTER_USER_EVENTS_TRACEFS=str(tmp_path),  # no user_events_data: a no-op
        PYTHONPATH=os.pathsep.join(filter(None, [python_path, env.get("PYTHONPATH")])),
        PYTHONWARNINGS="always::DeprecationWarning",
        **variables,
    )
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, "-c", SHOW_ROOT_HANDLERS],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    handlers = done.stdout.split()
    return (handlers, SDK_WARNING in done.stderr) if warned else handlers


# what the SDK says when it attaches its handler, about the variable that asked for it
SDK_WARNING = "The `OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED` environment variable"


def test_the_drop_in_line_attaches_a_logging_handler_unless_told_not_to(tmp_path):
    """OTEL_LOGS_EXPORTER=user_events is enough for ``logging`` records to be exported;
    OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED keeps its meaning when it is set."""
    variable = "OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED"
    logs = {"OTEL_TRACES_EXPORTER": "user_events", "OTEL_LOGS_EXPORTER": "user_events"}
    shown = {
        value: root_handlers(
            tmp_path, warned=True, **logs, **({} if value is None else {variable: value})
        )
        for value in (None, "", "true", "TRUE", "false", "no")
    }
    # (handlers, whether the SDK warned that the variable is deprecated: only when it is set)
    # (and beside it Python's last-resort handler, which printed the app's warnings before)
    ours = ["UserEventsLoggingHandler", "_StderrHandler"]
    assert shown == {
        None: (ours, False),
        "": (ours, False),  # empty is unset (the specification's rule)
        "true": (ours, True),
        "TRUE": (ours, True),
        "false": ([], False),
        "no": ([], False),  # as the SDK reads it: only "true" is true
    }
    # another log exporter alone: the SDK's default (no handler) is left as it was
    assert root_handlers(tmp_path, OTEL_LOGS_EXPORTER="console") == []
    # beside another exporter, the SDK's own handler (every record must be built)
    mixed = root_handlers(tmp_path, OTEL_LOGS_EXPORTER="console, user_events")
    assert mixed == ["LoggingHandler", "_StderrHandler"]


APP_LOGGING = """
import logging
logging.getLogger("app").warning("disk almost full")
logging.getLogger("app").info("not shown: below WARNING, as without a handler")
"""


@pytest.mark.parametrize("logs", ["user_events", "console, user_events"])
def test_the_drop_in_line_leaves_the_apps_console_logging_as_it_was(tmp_path, logs):
    """Only added to, never taken away: a handler on the root logger stops Python's
    last-resort handler, which printed the app's warnings on stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_PYTHON_CONFIGURATOR="user_events",
        OTEL_TRACES_EXPORTER="user_events",
        OTEL_LOGS_EXPORTER=logs,
        OTEL_METRICS_EXPORTER="none",
        OTEL_EXPORTER_USER_EVENTS_TRACEFS=str(tmp_path),  # no user_events_data: a no-op
    )
    without = subprocess.run(
        [sys.executable, "-c", APP_LOGGING], env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    assert without.stderr == "disk almost full\n"
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, "-c", APP_LOGGING], env=env, capture_output=True,
        text=True, timeout=120, check=True,
    )  # fmt: skip
    assert done.stderr.count("disk almost full\n") == 1, done.stderr
    assert "not shown" not in done.stderr


# What opentelemetry-instrumentation-logging 0.66 does when opentelemetry-instrument loads
# it: a handler of its own on the root logger, unless the SDK's is on (the variable "true")
# or OTEL_PYTHON_LOG_AUTO_INSTRUMENTATION is false. A stand-in, installed on PYTHONPATH under
# the same entry point, so the test does not need that package.
LOGGING_INSTRUMENTATION = """
import logging, os
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

class InstrumentationLoggingHandler(logging.Handler):
    def emit(self, record):
        pass

class LoggingInstrumentor(BaseInstrumentor):
    def instrumentation_dependencies(self):
        return []

    def _instrument(self, **kwargs):
        sdk = os.environ.get("OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED", "")
        mine = os.environ.get("OTEL_PYTHON_LOG_AUTO_INSTRUMENTATION", "true")
        if sdk.strip().lower() != "true" and mine.strip().lower() == "true":
            logging.getLogger().addHandler(InstrumentationLoggingHandler())

    def _uninstrument(self, **kwargs):
        pass
"""


def test_with_the_logging_instrumentation_installed_records_are_exported_once(tmp_path):
    """The logging instrumentation attaches its handler under opentelemetry-instrument;
    ours by default would export every record twice. Disabled, ours comes back."""
    site = tmp_path / "site"
    (site / "stand_in_logging-1.0.dist-info").mkdir(parents=True)
    (site / "stand_in_logging-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: stand-in-logging\nVersion: 1.0\n"
    )
    (site / "stand_in_logging-1.0.dist-info" / "entry_points.txt").write_text(
        "[opentelemetry_instrumentor]\nlogging = stand_in_logging:LoggingInstrumentor\n"
    )
    (site / "stand_in_logging.py").write_text(LOGGING_INSTRUMENTATION)
    logs = {"OTEL_TRACES_EXPORTER": "user_events", "OTEL_LOGS_EXPORTER": "user_events"}

    def handlers(**variables):
        return root_handlers(tmp_path, python_path=str(site), **logs, **variables)

    assert handlers() == ["InstrumentationLoggingHandler"]
    ours = ["UserEventsLoggingHandler", "_StderrHandler"]  # and the app's console, kept
    assert handlers(OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="wsgi, logging") == ours
    assert handlers(OTEL_PYTHON_LOG_AUTO_INSTRUMENTATION="false") == ours
    assert handlers(OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED="true") == ours


def test_a_distribution_naming_the_log_exporter_gets_the_handler_too(tmp_path):
    """A distribution that passes ``log_exporter_names`` instead of the variable."""
    code = (
        "import logging\n"
        "from opentelemetry_exporter_userevents.configurator import UserEventsConfigurator\n"
        "UserEventsConfigurator().configure(log_exporter_names=['user_events'])\n"
        "print(*sorted(type(h).__name__ for h in logging.getLogger().handlers))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
               OTEL_EXPORTER_USER_EVENTS_TRACEFS=str(tmp_path))  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert done.stdout.split() == ["UserEventsLoggingHandler", "_StderrHandler"]
