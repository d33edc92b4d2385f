# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsSampler without a kernel: DROP while nothing listens, the parent's decision
otherwise, and its wiring as OTEL_TRACES_SAMPLER=user_events and in a configuration file."""

import importlib.util
import os
import subprocess
import sys

import pytest
from opentelemetry import trace
from opentelemetry.sdk._configuration import _import_sampler
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, Decision
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.span import TraceState

from opentelemetry_exporter_userevents import UserEventsSampler
from opentelemetry_exporter_userevents._export import writer
from opentelemetry_exporter_userevents.sampler import sampler_factory

needs_configuration = pytest.mark.skipif(
    importlib.util.find_spec("opentelemetry.configuration") is None,
    reason="opentelemetry-configuration is not installed (it pins the newest SDK, so CI's "
    "oldest-SDK environment has none)",
)


@pytest.fixture(autouse=True)
def fresh_warning(monkeypatch):
    monkeypatch.setattr(writer, "_warned_unavailable", False)


def listened(sampler: UserEventsSampler) -> UserEventsSampler:
    """Pretend a tracer attached: point the sampler at a set enable word."""
    sampler._word = memoryview(bytearray(b"\1\0\0\0")).cast("I")
    return sampler


def provider_with(sampler):
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider.get_tracer("t"), memory


def test_spans_are_dropped_while_nobody_can_listen(tmp_path):
    tracer, memory = provider_with(UserEventsSampler(tracefs=str(tmp_path)))

    with tracer.start_as_current_span("unheard", attributes={"a": 1}) as span:
        span.add_event("e")
        recording = span.is_recording()
        sampled = span.get_span_context().trace_flags.sampled

    assert (recording, sampled) == (False, False)
    assert memory.get_finished_spans() == ()


def test_listened_spans_are_decided_by_the_parent_sampler(tmp_path):
    tracer, memory = provider_with(listened(UserEventsSampler(tracefs=str(tmp_path))))
    off_tracer, off_memory = provider_with(listened(UserEventsSampler(ALWAYS_OFF)))

    with tracer.start_as_current_span("heard", attributes={"a": 1}) as span:
        span.add_event("e")
    with off_tracer.start_as_current_span("heard but the parent says no"):
        pass

    (finished,) = memory.get_finished_spans()
    assert finished.name == "heard" and dict(finished.attributes) == {"a": 1}
    assert [event.name for event in finished.events] == ["e"]
    assert off_memory.get_finished_spans() == ()


def test_a_dropped_span_passes_the_parents_trace_state_on(tmp_path):
    sampler = UserEventsSampler(tracefs=str(tmp_path))
    state = TraceState([("vendor", "v1")])
    parent = SpanContext(1, 2, is_remote=True, trace_flags=TraceFlags(1), trace_state=state)

    result = sampler.should_sample(trace.set_span_in_context(NonRecordingSpan(parent)), 1, "n")
    root = sampler.should_sample(None, 1, "n")

    assert result.decision is Decision.DROP and result.trace_state == state
    assert root.decision is Decision.DROP and not root.trace_state


def test_closed_sampler_drops(tmp_path):
    sampler = listened(UserEventsSampler(tracefs=str(tmp_path)))
    assert sampler.should_sample(None, 1, "n").decision is Decision.RECORD_AND_SAMPLE

    sampler.close()

    assert sampler.should_sample(None, 1, "n").decision is Decision.DROP
    assert not sampler.enabled


def test_factory_argument_is_the_parents_ratio(caplog, monkeypatch, tmp_path):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_TRACEFS", str(tmp_path))
    descriptions = [sampler_factory(arg).get_description() for arg in (None, "", "0.25", "x")]

    assert descriptions[:2] == ["UserEventsSampler{ParentBased{root:AlwaysOnSampler,"
                                "remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:"
                                "AlwaysOffSampler,localParentSampled:AlwaysOnSampler,"
                                "localParentNotSampled:AlwaysOffSampler}}"] * 2  # fmt: skip
    assert "TraceIdRatioBased{0.25}" in descriptions[2]
    assert descriptions[3] == descriptions[0]
    assert any("not a ratio" in r.getMessage() for r in caplog.records)


def test_otel_traces_sampler_names_it(monkeypatch, tmp_path):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_TRACEFS", str(tmp_path))
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")

    sampler = _import_sampler("user_events")

    assert isinstance(sampler, UserEventsSampler)
    assert "TraceIdRatioBased{0.5}" in sampler.get_description()


CONFIG_FILE = """
file_format: "1.0"
tracer_provider:
  sampler: {user_events: {}}
  processors:
    - simple: {exporter: {console: {}}}
"""

SHOW_SAMPLER = """
from opentelemetry import trace
from opentelemetry.configuration import configure_sdk, load_config_file

configure_sdk(load_config_file({path!r}))
print(trace.get_tracer_provider().sampler.get_description())
"""


@needs_configuration
def test_configuration_file_names_it(tmp_path):
    config = tmp_path / "otel.yaml"
    config.write_text(CONFIG_FILE)
    env = dict(os.environ, OTEL_EXPORTER_USER_EVENTS_TRACEFS=str(tmp_path))

    done = subprocess.run(
        [sys.executable, "-c", SHOW_SAMPLER.format(path=str(config))],
        env=env, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip

    assert done.stdout.startswith("UserEventsSampler{ParentBased{root:AlwaysOnSampler")
