# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Nothing raises into the application from any exporter, processor, handler, sampler or
tracer, whatever it is handed (plain ints for enums, None where a value is expected, foreign
objects), listened and detached; every record handed to an exporter is counted once.

The kernel test tests/kernel/test_never_raises.py runs :func:`drive` on the guest."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsMetricExporter,
    UserEventsSampler,
    UserEventsSpanExporter,
)
from opentelemetry_exporter_userevents.abi.user_events import Registration
from opentelemetry_exporter_userevents.lean_tracer import UserEventsTracerProvider
from opentelemetry_exporter_userevents.logging_handler import UserEventsLoggingHandler
from opentelemetry_exporter_userevents.processors import (
    UserEventsLogRecordProcessor,
    UserEventsSpanProcessor,
)
from tests.support.fake_kernel import FakeKernel
from tests.support.otel_strategies import log_records, spans


class Unprintable:
    """A foreign object that fails at everything it is asked."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:  # hypothesis prints it in a failure report
        return "Unprintable()"

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"no {name}")


plain = st.one_of(
    st.none(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 9, 24, 25, -1, True]),
    st.floats(allow_nan=True),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.sampled_from([SeverityNumber.WARN, SeverityNumber.UNSPECIFIED]),
    st.builds(object),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
"""Values the SDK itself keeps as given."""
hostile = st.one_of(plain, st.builds(Unprintable))
"""And a foreign object that fails at everything (the SDK's own code raises on it where it
converts values, so it goes only where the SDK hands it on untouched)."""


@st.composite
def foreign_log_records(draw: st.DrawFn) -> object:
    """A record shaped like a ReadableLogRecord whose every field may be anything."""
    record = SimpleNamespace(
        **{
            name: draw(hostile)
            for name in (
                "timestamp",
                "observed_timestamp",
                "trace_id",
                "span_id",
                "trace_flags",
                "severity_text",
                "severity_number",
                "body",
                "attributes",
                "event_name",
            )
        }
    )
    resource = draw(st.one_of(hostile, st.just(Resource({"service.name": "x"}))))
    return draw(
        st.sampled_from(
            [
                SimpleNamespace(
                    log_record=record,
                    resource=resource,
                    instrumentation_scope=draw(hostile),
                    dropped_attributes=draw(hostile),
                    limits=None,
                ),
                draw(hostile),
            ]
        )
    )


@st.composite
def foreign_spans(draw: st.DrawFn) -> object:
    """A real span with one field replaced by anything, or anything at all."""
    span = draw(spans())
    field = draw(
        st.sampled_from(
            [
                "_name",
                "_context",
                "_kind",
                "_status",
                "_start_time",
                "_end_time",
                "_attributes",
                "_events",
                "_links",
                "_resource",
                "_parent",
            ]
        )
    )
    try:
        object.__setattr__(span, field, draw(hostile))
    except AttributeError:
        pass
    return draw(st.sampled_from([span, draw(hostile)]))


@st.composite
def sdk_log_records(draw: st.DrawFn) -> LogRecord:
    """What an application may hand the SDK's Logger.emit, which keeps it as given."""
    return LogRecord(
        severity_number=draw(st.one_of(st.integers(0, 24), st.sampled_from(list(SeverityNumber)))),
        severity_text=draw(st.one_of(st.none(), st.text(max_size=5))),
        body=draw(hostile),
        attributes=draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=3), plain))),
    )


@st.composite
def logging_records(draw: st.DrawFn) -> logging.LogRecord:
    record = logging.LogRecord(
        "app",
        logging.INFO,
        "f.py",
        1,
        draw(hostile),
        draw(st.one_of(st.none(), st.tuples(hostile))),
        None,
    )
    record.levelno = draw(st.one_of(st.integers(-5, 80), hostile))
    return record


def resource_writes(exporter: UserEventsSpanExporter | UserEventsLogExporter) -> list[int]:
    """Counts (in a one-element list) the resource records ``exporter`` writes of its own."""
    writer = exporter._writer
    resource = writer.registrations["resource"]
    found = [0]
    real = writer.write

    def write(registration, payload):  # type: ignore[no-untyped-def]
        if registration is resource:
            found[0] += 1
        return real(registration, payload)

    writer.write = write  # type: ignore[method-assign]
    return found


def counted_once(exporter: UserEventsSpanExporter | UserEventsLogExporter, handed: int) -> None:
    """Each record handed was counted exactly once, besides the resource records."""
    stats = exporter.stats.snapshot()
    total = sum(v for k, v in stats.items() if k != "truncated")
    assert total == handed + exporter.resource_writes[0], stats  # type: ignore[union-attr]


def drive(
    tracefs: str | None,
    listened: bool,
    data: st.DataObject,
    prefix: str = "nr",
    listen: Callable[[Registration], None] | None = None,
) -> None:
    """Every public entry point once with what ``data`` draws; raises only on a failed
    check. ``listened``: ``listen`` is called with every registration (a real tracer on the
    kernel), or without ``listen`` every enable word is set to 1 (as the fake kernel
    does); else every word is 0 (no ``listen``) or left as the kernel keeps it."""
    span_exporter = UserEventsSpanExporter(tracefs=tracefs, prefix=prefix)
    log_exporter = UserEventsLogExporter(tracefs=tracefs, prefix=prefix)
    metric_exporter = UserEventsMetricExporter(tracefs=tracefs, prefix=prefix)
    span_exporter.resource_writes = resource_writes(span_exporter)  # type: ignore[attr-defined]
    log_exporter.resource_writes = resource_writes(log_exporter)  # type: ignore[attr-defined]
    sampler = UserEventsSampler(ParentBased(TraceIdRatioBased(0.5)), tracefs=tracefs, prefix=prefix)
    span_processor = UserEventsSpanProcessor(UserEventsSpanExporter(tracefs=tracefs, prefix=prefix))
    log_exporter_2 = UserEventsLogExporter(tracefs=tracefs, prefix=prefix)
    log_processor = UserEventsLogRecordProcessor(log_exporter_2)
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(log_processor)
    handler = UserEventsLoggingHandler(log_exporter_2, logger_provider=provider)
    tracer = UserEventsTracerProvider(sampler=sampler).get_tracer("nr")
    exporters = (span_exporter, log_exporter, log_exporter_2, metric_exporter)
    if listen is not None:
        if listened:
            for exporter in exporters:
                for registration in exporter._writer.registrations.values():
                    assert registration is not None
                    listen(registration)
            assert sampler.enabled and log_exporter.any_class_word[0]
        else:
            assert not sampler.enabled and not log_exporter.any_class_word[0]
    words = [
        *(r.enable_word for r in span_exporter._writer.registrations.values() if r),
        *(r.enable_word for r in log_exporter._writer.registrations.values() if r),
        *(r.enable_word for r in log_exporter_2._writer.registrations.values() if r),
        *(r.enable_word for r in metric_exporter._writer.registrations.values() if r),
        *(r.enable_word for r in span_processor.exporter._writer.registrations.values() if r),
        log_exporter.any_class_word,
        log_exporter_2.any_class_word,
        sampler._word,
    ]
    for word in words if listen is None else ():
        if word.readonly:
            continue
        word[0] = 1 if listened else 0
    try:
        span_batch = data.draw(st.lists(foreign_spans(), max_size=3))
        assert span_exporter.export(span_batch).name == "SUCCESS"
        log_batch = data.draw(st.lists(st.one_of(foreign_log_records(), log_records()), max_size=3))
        assert log_exporter.export(log_batch).name == "SUCCESS"
        # Every record handed to an exporter was counted once (written, not listened or
        # dropped), besides the resource records the exporter wrote of its own.
        counted_once(span_exporter, len(span_batch))
        counted_once(log_exporter, len(log_batch))
        metric_exporter.export(data.draw(hostile))
        span_exporter.export(data.draw(hostile))  # not a batch: no count (not a record)
        log_exporter.export(data.draw(hostile))
        for span in data.draw(st.lists(foreign_spans(), max_size=2)):
            span_processor.on_end(span)
        for record in data.draw(st.lists(foreign_log_records(), max_size=2)):
            log_processor.on_emit(record)  # type: ignore[arg-type]
        logger = provider.get_logger(prefix)
        for record in data.draw(st.lists(sdk_log_records(), max_size=2)):
            logger.emit(record)
        for record in data.draw(st.lists(logging_records(), max_size=2)):
            handler.handle(record)
        result = sampler.should_sample(
            data.draw(hostile), data.draw(hostile), data.draw(hostile), data.draw(hostile)
        )
        assert result.decision is not None
        context = data.draw(hostile)
        tracer.start_span(data.draw(hostile), context=context).end()
        with tracer.start_as_current_span(data.draw(hostile), context=context):
            pass
    finally:
        for closable in (span_exporter, log_exporter, metric_exporter, span_processor):
            closable.shutdown()
        log_exporter_2.shutdown()
        sampler.close()
        provider.shutdown()


@pytest.mark.parametrize("listened", [True, False], ids=["listened", "detached"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_nothing_raises_into_the_application(listened, data):
    with pytest.MonkeyPatch.context() as monkeypatch, TemporaryDirectory() as tmp:
        fake = FakeKernel(monkeypatch, Path(tmp))
        try:
            drive(fake.tracefs, listened, data)
        finally:
            fake.settle()
            for sock in fake._sockets:
                sock.close()


def test_a_plain_int_severity_is_written_and_a_foreign_one_counted(monkeypatch, tmp_path):
    """The issue's case: the SDK keeps a plain int severity_number as given."""
    fake = FakeKernel(monkeypatch, tmp_path)
    exporter = UserEventsLogExporter(tracefs=fake.tracefs, prefix="sev")
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(UserEventsLogRecordProcessor(exporter))
    logger = provider.get_logger("app")
    logger.emit(LogRecord(severity_number=17, body="an int"))  # type: ignore[arg-type]
    logger.emit(LogRecord(severity_number=SeverityNumber.ERROR, body="an enum"))
    logger.emit(LogRecord(severity_number="17", body="a str"))  # type: ignore[arg-type]
    logger.emit(LogRecord(severity_number=99, body="out of range"))  # type: ignore[arg-type]
    fake.settle(exporter)
    stats = exporter.stats.snapshot()
    assert stats["dropped_invalid"] == 2
    assert len(fake.records("sev_log_error")) == 2
