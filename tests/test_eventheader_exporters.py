# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``format="eventheader"`` (OTEL_EXPORTER_USER_EVENTS_FORMAT, the configuration file's
``format``): the exporters register ``<provider>_L<level>K<keyword>`` single-format with
EventHeader's fields, write Common Schema events the reader maps back, and keep the default
format's guarantees: the enable bit first, counted drops and truncations, never raising."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsSampler,
    UserEventsSpanExporter,
)
from opentelemetry_exporter_userevents._export.config import ExporterConfig
from opentelemetry_exporter_userevents.processors import (
    UserEventsLogRecordProcessor,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.reader.decode.common_schema import map_event
from opentelemetry_exporter_userevents.reader.decode.eventheader import decode_event
from opentelemetry_exporter_userevents.record.eventheader import TRACEPOINT_FIELDS
from opentelemetry_exporter_userevents.record.flags import TRUNCATION_MARK
from tests.support.fake_kernel import FakeKernel
from tests.support.span_fixtures import make_logs, make_spans


def mapped(fake: FakeKernel, name: str) -> list[Any]:
    return [
        map_event(decode_event(name, payload), 0, 0, "user_events:" + name)
        for payload in fake.records(name)
    ]


def test_span_and_log_exporters_register_eventheader_tracepoints(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    spans = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="MyProv", format="eventheader")
    logs = UserEventsLogExporter(tracefs=fake.tracefs, prefix="MyProv", format="eventheader")
    assert fake.commands == [f"MyProv_L{n}K1 {TRACEPOINT_FIELDS}" for n in (4, 1, 2, 3, 5)]
    assert spans.registration is not None and spans.registration.system == "user_events"
    assert set(logs.registrations) == {"L1", "L2", "L3", "L4", "L5"}
    fake.settle(spans, logs)


def test_spans_and_logs_read_back_through_the_reader(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    span_exporter = UserEventsSpanExporter(tracefs=fake.tracefs, format="eventheader")
    log_exporter = UserEventsLogExporter(tracefs=fake.tracefs, format="eventheader")
    spans, logs = make_spans(), make_logs()
    span_exporter.export(spans)
    log_exporter.export(logs)
    fake.settle(span_exporter, log_exporter)

    read = mapped(fake, "otel_L4K1")
    names = sorted(r.record.name for r in read if hasattr(r.record, "name"))
    assert names == sorted(s.name for s in spans)
    by_level = {n: len(mapped(fake, f"otel_L{n}K1")) for n in (1, 2, 3, 5)}
    assert by_level == {1: 4, 2: 4, 3: 4, 5: 8}  # fatal, error, warn; trace and debug
    assert span_exporter.stats.written == len(spans)
    assert log_exporter.stats.written == len(logs)
    assert span_exporter.stats.truncated == 0


def test_the_option_from_the_environment_with_its_keyword(monkeypatch, tmp_path):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_FORMAT", "EventHeader")
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_EVENTHEADER_KEYWORD", "0x1f")
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_PREFIX", "9lives")  # a provider, no C name
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs)
    sampler = UserEventsSampler(tracefs=fake.tracefs)
    assert fake.commands == [f"9lives_L4K1f {TRACEPOINT_FIELDS}"]  # the sampler's is the same
    sampler.close()
    fake.settle(exporter)


def test_configuration_file_keys_and_bad_values(caplog):
    config = ExporterConfig.from_arguments(format="eventheader", eventheader_keyword=5)
    assert (config.format, config.eventheader_keyword) == ("eventheader", 5)
    bad_format = ExporterConfig.from_arguments(format="json")
    bad_provider = ExporterConfig.from_arguments(format="eventheader", prefix="my-provider")
    bad_keyword = ExporterConfig.from_arguments(format="eventheader", eventheader_keyword="-1")
    assert bad_format.format == "default"
    assert bad_provider.prefix == "otel"
    assert bad_keyword.eventheader_keyword == 1
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "format 'json' is none of default, eventheader" in messages
    assert "'my-provider' is not an EventHeader provider name" in messages
    assert "keyword '-1' is not a whole number" in messages
    assert ExporterConfig.from_arguments().format == "default"


def test_nothing_is_built_while_nobody_listens(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, format="eventheader")
    assert exporter.registration is not None
    exporter.registration.enable_word[0] = 0

    def must_not_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("encoded while nobody listened")

    monkeypatch.setattr(exporter, "_encode", must_not_run)
    exporter.export(make_spans())
    fake.settle(exporter)
    assert exporter.stats.not_listened == 2 and exporter.stats.written == 0


def test_a_span_that_cannot_be_encoded_is_counted_never_raised(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, format="eventheader")
    span = make_spans()[0]
    monkeypatch.setattr(type(span), "end_time", property(lambda self: 10**30))  # year > 9999
    assert exporter.export([span]).name == "SUCCESS"
    fake.settle(exporter)
    assert exporter.stats.dropped_invalid == 1


def test_a_record_cut_to_fit_is_counted(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsLogExporter(tracefs=fake.tracefs, format="eventheader")
    (readable,) = [r for r in make_logs() if r.log_record.body == "plain text"][:1]
    readable.log_record.body = "x" * 100_000
    exporter.export([readable])
    fake.settle(exporter)
    level = exporter.registration_for(readable.log_record.severity_number.value)
    assert level is not None
    ((record,),) = [[m.record for m in mapped(fake, level.name)]]
    assert record.body.endswith(TRUNCATION_MARK)
    assert exporter.stats.truncated == 1 and exporter.stats.written == 1
    assert all(len(p) <= 4064 for p in fake.records(level.name))


def test_processors_and_redaction_work_unchanged(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)

    def redact(key: str, value: Any) -> Any:
        return "[redacted]" if key in ("service.instance.id", "str") else value

    spans = UserEventsSpanExporter(tracefs=fake.tracefs, format="eventheader", redact=redact)
    logs = UserEventsLogExporter(tracefs=fake.tracefs, format="eventheader")
    resource = Resource({"service.name": "svc", "service.instance.id": "secret-pod"})
    make_spans(UserEventsSpanProcessor(spans), resource=resource)
    make_logs(UserEventsLogRecordProcessor(logs), resource=resource)
    fake.settle(spans, logs)
    read = mapped(fake, "otel_L4K1")
    span_records = [r for r in read if r.record.__class__.__name__ == "CheckedSpan"]
    assert len(span_records) == 2
    assert {r.resource["service.instance.id"] for r in span_records} == {"[redacted]"}
    server = next(r.record for r in span_records if r.record.attributes)
    assert server.attributes["str"] == "[redacted]"
    assert logs.stats.written == 25


@pytest.mark.parametrize("value", ["eventheader", "EVENTHEADER", " eventheader "])
def test_the_format_is_case_and_space_insensitive(value):
    assert ExporterConfig.from_arguments(format=value).format == "eventheader"


def test_the_sampler_takes_the_option_as_a_keyword(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    sampler = UserEventsSampler(tracefs=fake.tracefs, format="eventheader", eventheader_keyword=2)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, format="eventheader",
                                      eventheader_keyword=2)  # fmt: skip
    assert fake.commands == [f"otel_L4K2 {TRACEPOINT_FIELDS}"]  # one tracepoint, one bit
    sampler.close()
    fake.settle(exporter)
