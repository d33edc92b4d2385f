# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OTEL_PYTHON_CONFIGURATOR=user_events with metrics: OTEL_METRICS_EXPORTER=user_events and a
configuration file's periodic reader of the user_events exporter both install
UserEventsMetricReader, with the exporter's settings (no kernel needed)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

needs_configuration = pytest.mark.skipif(
    importlib.util.find_spec("opentelemetry.configuration") is None,
    reason="opentelemetry-configuration is not installed (it pins the newest SDK, so CI's "
    "oldest-SDK environment has none)",
)

INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"

SHOW_READERS = """
import json
from opentelemetry import metrics
provider = metrics.get_meter_provider()
readers = provider._metric_readers
def describe(reader):
    exporter = getattr(reader, "_exporter", None)
    config = getattr(exporter, "config", None)
    return [type(reader).__name__, type(exporter).__name__, getattr(config, "prefix", None),
            getattr(reader, "export_interval_millis", None)
            or getattr(reader, "_export_interval_millis", None)]
print(json.dumps([describe(r) for r in readers]))
"""


def instrumented(tmp_path, **variables):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_PYTHON_CONFIGURATOR="user_events",
        OTEL_TRACES_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_USER_EVENTS_TRACEFS=str(tmp_path),  # no user_events_data: a no-op
        **variables,
    )
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, "-c", SHOW_READERS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_environment_path_installs_the_reader_that_skips_while_nobody_listens(tmp_path):
    shown = instrumented(
        tmp_path,
        OTEL_METRICS_EXPORTER="user_events,console",
        OTEL_EXPORTER_USER_EVENTS_PREFIX="svc",
        OTEL_METRIC_EXPORT_INTERVAL="1234",
    )
    assert shown == [
        ["UserEventsMetricReader", "UserEventsMetricExporter", "svc", 1234.0],
        ["PeriodicExportingMetricReader", "ConsoleMetricExporter", None, 1234.0],
    ]


CONFIG_FILE = """
file_format: "1.0"
meter_provider:
  readers:
    - periodic: {interval: 5000, exporter: {user_events: {prefix: from_yaml}}}
    - periodic: {exporter: {console: {}}}
"""


@needs_configuration
def test_configuration_file_path_installs_the_same_reader(tmp_path):
    config = tmp_path / "otel.yaml"
    config.write_text(CONFIG_FILE)
    shown = instrumented(tmp_path, OTEL_CONFIG_FILE=str(config))
    assert shown == [
        ["UserEventsMetricReader", "UserEventsMetricExporter", "from_yaml", 5000.0],
        ["PeriodicExportingMetricReader", "ConsoleMetricExporter", None, 60000.0],
    ]
