# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A prefix the format does not allow is refused the same way in both formats: the
exporter registers nothing and exports nothing, and says why once. It used to fall back to
``otel`` with a warning, so a service's records landed under another provider's name."""

from __future__ import annotations

import logging

import pytest

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsSampler,
    UserEventsSpanExporter,
)
from tests.support.fake_kernel import FakeKernel
from tests.support.span_fixtures import make_logs, make_spans


@pytest.mark.parametrize(
    ("format_", "prefix", "rule"),
    [
        ("default", "bad-name", "is not a C identifier of at most 32 characters"),
        ("default", "x" * 33, "is not a C identifier of at most 32 characters"),
        ("eventheader", "bad-name", "is not an EventHeader provider name"),
        ("eventheader", "my provider", "is not an EventHeader provider name"),
    ],
)
def test_a_prefix_the_format_does_not_allow_registers_and_exports_nothing(
    monkeypatch, tmp_path, caplog, format_, prefix, rule
):
    fake = FakeKernel(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING):
        spans = UserEventsSpanExporter(tracefs=fake.tracefs, prefix=prefix, format=format_)
        logs = UserEventsLogExporter(tracefs=fake.tracefs, prefix=prefix, format=format_)
        sampler = UserEventsSampler(tracefs=fake.tracefs, prefix=prefix, format=format_)
    assert spans.export(make_spans()).name == "SUCCESS"  # never an error into the app
    logs.export(make_logs())
    fake.settle(spans, logs)
    assert fake.commands == [] and fake.messages == []
    assert sampler.registration is None and not sampler.enabled
    messages = [r.getMessage() for r in caplog.records]
    said = f"user_events exporter disabled, it will export nothing: prefix {prefix!r} {rule}"
    assert sum(said in m for m in messages) == 3, messages
    assert not any("using 'otel'" in m for m in messages)


@pytest.mark.parametrize("format_", ["default", "eventheader"])
def test_an_allowed_prefix_registers_as_before(monkeypatch, tmp_path, format_):
    fake = FakeKernel(monkeypatch, tmp_path)
    spans = UserEventsSpanExporter(tracefs=fake.tracefs, prefix="checkout", format=format_)
    spans.export(make_spans())
    fake.settle(spans)
    assert any(c.startswith("checkout") for c in fake.commands)  # and the announcement
    assert fake.messages
