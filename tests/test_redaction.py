# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""redact=: attributes rewritten or removed before any record leaves the process."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsSpanExporter,
)
from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record.schema import LOG, RESOURCE, SPAN
from tests.support.fake_kernel import FakeKernel
from tests.support.span_fixtures import make_logs, make_spans

SECRET = "hunter2"


def redact(key, value):
    if key in ("password", "host.name"):
        return "[redacted]"
    if key == "bytes" or key.startswith("~"):
        return None  # left out
    return value


def test_span_event_link_and_resource_attributes_are_redacted(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="r", redact=redact)
    spans = make_spans(resource=Resource({"host.name": "h1", "service.name": "s"}))

    exporter.export(spans)
    fake.settle(exporter)

    by_name = {r["name"]: r for r in fake.decoded(SPAN, "r_span")}
    server = by_name["GET /users/{id}"]
    attributes = anyvalue.decode(server["attributes"])
    assert "bytes" not in attributes and "~tilde" not in attributes
    assert attributes["str"] == "GET /users/{id}", "the others are untouched"
    (event,) = anyvalue.decode(server["events"])
    assert event["attributes"] == {"key": "user:1"}, "its bytes attribute was left out"
    (resource,) = fake.decoded(RESOURCE, "r_resource")
    assert anyvalue.decode(resource["attributes"]) == {"host.name": "[redacted]",
                                                       "service.name": "s"}  # fmt: skip
    assert server["dropped_attributes"] == 0


def test_redaction_keeps_the_sdk_dropped_counts(monkeypatch, tmp_path):
    memory = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=2))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("s") as span:
        span.set_attributes({"a": 1, "password": SECRET, "c": 3, "d": 4})
    (finished,) = memory.get_finished_spans()
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="r", redact=redact)

    exporter.export([finished])
    fake.settle(exporter)

    (values,) = fake.decoded(SPAN, "r_span")
    assert values["dropped_attributes"] == finished.dropped_attributes == 2
    assert SECRET.encode() not in b"".join(fake.messages)


def test_log_attributes_are_redacted_and_bodies_are_not(monkeypatch, tmp_path):
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsLogExporter(
        tracefs=fake.tracefs, prefix="r", redact=lambda key, value: None if key == "n" else value
    )
    logs = make_logs()

    exporter.export(logs)
    fake.settle(exporter)

    records = [r for cls in ("trace", "debug", "info", "warn", "error", "fatal")
               for r in fake.decoded(LOG, f"r_log_{cls}")]  # fmt: skip
    assert len(records) == len(logs)
    assert all("n" not in anyvalue.decode(r["attributes"]) for r in records)
    assert any(anyvalue.decode(r["body"]) == "plain text" for r in records)


def test_a_failing_redactor_drops_the_record_instead_of_leaking_it(monkeypatch, tmp_path, caplog):
    def broken(key, value):
        if value == SECRET:
            raise ValueError("cannot redact this")
        return value

    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="r", redact=broken)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("leaky", attributes={"password": SECRET}):
        pass
    with tracer.start_as_current_span("fine", attributes={"user": "u"}):
        pass

    assert exporter.export(memory.get_finished_spans()).name == "SUCCESS"
    fake.settle(exporter)

    stats = exporter.stats.snapshot()
    assert stats["dropped_invalid"] == 1 and stats["written"] == 1 + 1, "and the resource"
    assert [anyvalue.decode(r["attributes"]) for r in fake.decoded(SPAN, "r_span")] == [
        {"user": "u"}
    ]
    assert SECRET.encode() not in b"".join(fake.messages)
    assert any("cannot redact this" in r.getMessage() for r in caplog.records)


def test_the_redactor_runs_only_for_records_a_tracer_listens_to(monkeypatch, tmp_path):
    calls = []
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsSpanExporter(
        tracefs=fake.tracefs, prefix="r", redact=lambda k, v: calls.append(k) or v
    )
    registration = exporter.registration
    registration.enable_word[0] = 0  # nobody listens

    exporter.export(make_spans())
    fake.settle(exporter)

    assert calls == [] and exporter.stats.snapshot()["not_listened"] == 2


def test_a_redactor_that_is_not_callable_is_refused_at_once(tmp_path):
    with pytest.raises(TypeError, match="redact must be a callable"):
        UserEventsSpanExporter(tracefs=str(tmp_path), redact="password")
