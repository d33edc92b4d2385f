# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The exporters without user_events: one warning, then a no-op that never raises."""

import logging

import pytest

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents._export import writer
from opentelemetry_exporter_userevents._export.config import ExporterConfig
from tests.support.span_fixtures import make_logs, make_spans


@pytest.fixture(autouse=True)
def fresh_warning(monkeypatch):
    monkeypatch.setattr(writer, "_warned_unavailable", False)


def test_unavailable_exporters_warn_once_and_do_nothing(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "opentelemetry_exporter_userevents")

    spans = UserEventsSpanExporter(tracefs=str(tmp_path))
    logs = UserEventsLogExporter(tracefs=str(tmp_path))
    made_spans = make_spans(UserEventsSpanProcessor(spans))
    made_logs = make_logs(UserEventsLogRecordProcessor(logs))

    assert spans.export(made_spans).name == "FAILURE", "the provider shut it down"
    assert logs.export(made_logs).name == "FAILURE", "the provider shut it down"
    assert UserEventsSpanExporter(tracefs=str(tmp_path)).export(made_spans).name == "SUCCESS"
    assert UserEventsLogExporter(tracefs=str(tmp_path)).export(made_logs).name == "SUCCESS"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "export nothing" in warnings[0]
    assert "CONFIG_USER_EVENTS" in warnings[0]
    assert set(spans.stats.snapshot().values()) == {0}
    assert not spans.enabled and not logs.enabled_for(17)


def test_shutdown_is_idempotent_and_export_after_it_fails(tmp_path, caplog):
    (tmp_path / "user_events_data").write_bytes(b"")  # opens, but registration fails
    exporter = UserEventsSpanExporter(tracefs=str(tmp_path))
    exporter.shutdown()
    exporter.shutdown()

    assert any("already shut down" in r.getMessage() for r in caplog.records)


def test_settings_from_arguments_then_environment_then_defaults(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_PREFIX", "svc_a")
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_MAX_RECORD_SIZE", "2048")
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_RESOURCE_INTERVAL", "not a number")

    from_env = ExporterConfig.from_arguments()
    from_args = ExporterConfig.from_arguments(prefix="svc_b", max_record_size=8184, extra=1)
    bad = ExporterConfig.from_arguments(prefix="has space", max_record_size=99999)

    assert (from_env.prefix, from_env.max_record_size) == ("svc_a", 2048)
    assert from_env.resource_interval_millis == 10_000
    assert (from_args.prefix, from_args.max_record_size) == ("svc_b", 8184)
    assert (bad.prefix, bad.max_record_size) == ("otel", 4064)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "not a whole number" in messages and "unknown options ['extra']" in messages
    assert "not a C identifier" in messages and "outside 1024..8184" in messages


def test_records_for_a_tracepoint_that_failed_to_register_are_counted(tmp_path, caplog):
    (tmp_path / "user_events_data").write_bytes(b"")  # opens, but every ioctl fails
    spans = UserEventsSpanExporter(tracefs=str(tmp_path))
    logs = UserEventsLogExporter(tracefs=str(tmp_path))

    assert spans.export(make_spans()).name == "SUCCESS"
    assert logs.export(make_logs()).name == "SUCCESS"

    assert spans.stats.dropped_unregistered == 2
    assert logs.stats.dropped_unregistered == 25
    assert any("cannot register" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("argument", "variable", "expected"),
    [
        (None, None, True),
        (None, "false", False),
        (None, " TRUE ", True),
        (False, "true", False),  # the argument wins
        ("false", None, False),  # a configuration file may pass the text
        (None, "no", True),  # neither true nor false: warned, default kept
    ],
)
def test_multi_format_setting(monkeypatch, caplog, argument, variable, expected):
    if variable is None:
        monkeypatch.delenv("OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT", raising=False)
    else:
        monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT", variable)
    config = ExporterConfig.from_arguments(multi_format=argument)
    assert config.multi_format is expected
    assert ("neither true nor false" in caplog.text) == (variable == "no")
