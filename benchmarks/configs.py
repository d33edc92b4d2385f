# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The configurations compared, each built fresh: a workload of spans (4 attributes and 1
event each) or log records (4 attributes each), and what to close afterwards.

The keys follow the issue: a NoOp, b SDK alone, c this exporter not listened to, d this
exporter with ftrace listening (needs user_events: the test bed), e OTLP protobuf encoding,
f ConsoleSpanExporter to /dev/null, g the sampler while not listened to (``g_off``: the
SDK's ALWAYS_OFF, the least any sampler can cost). ``c_batch`` and
``c_simple`` are the SDK's own processors around this exporter (the drop-in path without
``OTEL_PYTHON_CONFIGURATOR=user_events``, and a configuration file's ``simple``);
``c_floor`` is a processor that does nothing, the least any processor costs; ``d_floor`` is d
writing one fixed payload instead of encoding each item, the least any encoder can cost.
``c_eh`` and ``d_eh`` are c and d with ``format="eventheader"`` (Common Schema events on
``<prefix>_L<level>K1``): what choosing that format costs, beside the default.

The ``logging`` signal is a standard-library ``logger.info`` call: b with no OpenTelemetry
handler, h through ``UserEventsLoggingHandler`` (what the configurator installs) with
nobody listening, h_sdk through the SDK's own ``LoggingHandler`` and this processor, d
through ``UserEventsLoggingHandler`` with ftrace listening.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import NoOpLoggerProvider, SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import (
    LoggerProvider,
    LoggingHandler,
    LogRecordProcessor,
    ReadableLogRecord,
    ReadWriteLogRecord,
)
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    ConsoleLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSampler,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.abi import Registration
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.lean_tracer import UserEventsTracerProvider
from opentelemetry_exporter_userevents.logging_handler import UserEventsLoggingHandler

ATTRIBUTES = {
    "http.request.method": "GET",
    "http.response.status_code": 200,
    "url.path": "/cart/4",
    "server.address": "shop.example",
}
EVENT_ATTRIBUTES = {"items": 4}
RESOURCE = Resource({"service.name": "checkout", "host.name": "bench"})
PREFIX = "bench"
"""Each configuration registers its own tracepoints (``bench_c_span``, ``bench_d_eh_L4K1``,
...): a listener of one must not make another one listened."""
EVENTHEADER_KEYS = ("c_eh", "d_eh")
"""The configurations whose exporter writes ``format="eventheader"``."""

LABELS = {
    "spans": {
        "a": "NoOp tracer",
        "b": "SDK, no processor",
        "c": "SDK + user_events, nobody listening",
        "c_floor": "SDK + a processor that does nothing (any processor's floor)",
        "c_batch": "SDK + BatchSpanProcessor(user_events), nobody listening",
        "c_simple": "SDK + SimpleSpanProcessor(user_events), nobody listening",
        "c_eh": 'SDK + user_events, format="eventheader", nobody listening',
        "d": "SDK + user_events, ftrace listening",
        "d_floor": "d writing one fixed payload, no encoding (any encoder's floor)",
        "d_eh": 'SDK + user_events, format="eventheader", ftrace listening',
        "e": "SDK + OTLP protobuf encoding",
        "f": "SDK + ConsoleSpanExporter to /dev/null",
        "g": "UserEventsTracerProvider (sampler) and user_events, nobody listening",
        "g_off": "SDK + ALWAYS_OFF sampler (any sampler's floor)",
    },
    "logs": {
        "a": "NoOp logger",
        "b": "SDK, no processor",
        "c": "SDK + user_events, nobody listening",
        "c_floor": "SDK + a processor that does nothing (any processor's floor)",
        "c_batch": "SDK + BatchLogRecordProcessor(user_events), nobody listening",
        "c_simple": "SDK + SimpleLogRecordProcessor(user_events), nobody listening",
        "c_eh": 'SDK + user_events, format="eventheader", nobody listening',
        "d": "SDK + user_events, ftrace listening",
        "d_floor": "d writing one fixed payload, no encoding (any encoder's floor)",
        "d_eh": 'SDK + user_events, format="eventheader", ftrace listening',
        "e": "SDK + OTLP protobuf encoding",
        "f": "SDK + ConsoleLogRecordExporter to /dev/null",
    },
    "logging": {
        "b": "logger.info, no OpenTelemetry handler",
        "h": "UserEventsLoggingHandler, nobody listening",
        "h_sdk": "the SDK's LoggingHandler + user_events processor, nobody listening",
        "d": "UserEventsLoggingHandler, ftrace listening",
    },
}


@dataclass
class Setup:
    key: str
    run: Callable[[int], None]
    """Does ``n`` operations (spans or log records)."""
    closers: list[Callable[[], object]] = field(default_factory=list)

    def close(self) -> None:
        for closer in reversed(self.closers):
            closer()


# --- The work ---------------------------------------------------------------------------


def span_workload(tracer: trace.Tracer) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            with tracer.start_as_current_span(
                "GET /cart/{id}", kind=SpanKind.SERVER, attributes=ATTRIBUTES
            ) as span:
                span.add_event("cart loaded", EVENT_ATTRIBUTES)

    return run


def log_workload(logger: object) -> Callable[[int], None]:
    emit = logger.emit  # type: ignore[attr-defined]

    def run(n: int) -> None:
        for _ in range(n):
            emit(
                severity_number=SeverityNumber.INFO,
                severity_text="INFO",
                body="cart loaded",
                attributes=ATTRIBUTES,
            )

    return run


# --- Exporters that stand for the alternatives ------------------------------------------


class OtlpEncodingSpanExporter(SpanExporter):
    """What an OTLP exporter does before the network: encode the spans to protobuf."""

    def __init__(self) -> None:
        self.encoded = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.encoded += len(encode_spans(spans).SerializeToString())
        return SpanExportResult.SUCCESS


class OtlpEncodingLogExporter(LogRecordExporter):
    def __init__(self) -> None:
        self.encoded = 0

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.encoded += len(encode_logs(batch).SerializeToString())
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class NothingLogRecordProcessor(LogRecordProcessor):
    """What any processor costs at least: the SDK's call into it (the SDK's SpanProcessor
    base class does nothing; its LogRecordProcessor is abstract)."""

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def fixed_payload(exporter: UserEventsSpanExporter | UserEventsLogExporter) -> None:
    """Make ``exporter`` write the payload of the first item it encodes for every item: the
    listened path (enable bit, resource, one ``writev``, the kernel's record) without the
    cost of encoding."""
    payloads: list[tuple[bytes, bool]] = []
    real = exporter._export_items

    def export_items(items: Any, route: Any, encode: Any, redact: Any) -> bool:
        def fixed(item: Any, resource_id: int, max_size: int) -> tuple[bytes, bool]:
            if not payloads:
                payloads.append(encode(item, resource_id, max_size))
            return payloads[0]

        return real(items, route, fixed, redact)

    exporter._export_items = export_items  # type: ignore[method-assign]


# --- ftrace listening --------------------------------------------------------------------


class Listening:
    """ftrace attached to some tracepoints, in a tracefs instance of its own."""

    def __init__(self, registrations: Sequence[Registration | None], name: str) -> None:
        """``name``: the configuration's, for an instance of its own (``bench_<name>_<pid>``)."""
        tracefs = Tracefs.find()
        if tracefs is None or any(r is None or not r.tracepoint for r in registrations):
            raise RuntimeError("listening needs user_events (run it in the test bed)")
        self.tracefs = tracefs
        self.instance = f"bench_{name}_{os.getpid()}"
        os.mkdir(os.path.join(tracefs.path, "instances", self.instance))
        self.attached = [(r.system, r.tracepoint) for r in registrations if r and r.tracepoint]
        for system, name in self.attached:
            tracefs.set_enabled(system, name, True, self.instance)

    def close(self) -> None:
        for system, name in self.attached:
            self.tracefs.set_enabled(system, name, False, self.instance)
        os.rmdir(os.path.join(self.tracefs.path, "instances", self.instance))


def exporter_format(key: str) -> str | None:
    """``"eventheader"`` for the EventHeader configurations, else the default format."""
    return "eventheader" if key in EVENTHEADER_KEYS else None


def listened(
    exporter: UserEventsSpanExporter | UserEventsLogExporter,
    registrations: list[Registration | None],
) -> list[Registration | None]:
    """The workload's tracepoints and, in our format, the resource's (EventHeader's records
    carry the resource in each record: it registers no resource tracepoint)."""
    resource = exporter._writer.registrations.get("resource", False)
    return registrations if resource is False else [*registrations, resource]


# --- The configurations ------------------------------------------------------------------


def span_setup(key: str) -> Setup:
    """A fresh configuration ``key`` of the span benchmark."""
    if key == "a":
        return Setup(key, span_workload(trace.NoOpTracerProvider().get_tracer("checkout")))
    prefix = f"{PREFIX}_{key}"
    sampler = UserEventsSampler(prefix=prefix) if key == "g" else None
    provider: Any = TracerProvider(
        resource=RESOURCE, sampler=ALWAYS_OFF if key == "g_off" else sampler
    )
    if sampler is not None:  # what OTEL_TRACES_SAMPLER=user_events installs
        provider = UserEventsTracerProvider(provider)
    setup = Setup(key, span_workload(provider.get_tracer("checkout", "1.0.0")))
    setup.closers.append(provider.shutdown)
    if sampler is not None:
        setup.closers.append(sampler.close)
    if key in ("c", "d", "d_floor", "g", *EVENTHEADER_KEYS):
        exporter = UserEventsSpanExporter(prefix=prefix, format=exporter_format(key))
        provider.add_span_processor(UserEventsSpanProcessor(exporter))
        if key == "d_floor":
            fixed_payload(exporter)
        if key in ("d", "d_floor", "d_eh"):
            listening = Listening(listened(exporter, [exporter.registration]), prefix)
            setup.closers.append(listening.close)
    elif key == "c_floor":
        provider.add_span_processor(SpanProcessor())
    elif key == "c_batch":
        provider.add_span_processor(BatchSpanProcessor(UserEventsSpanExporter(prefix=prefix)))
    elif key == "c_simple":
        provider.add_span_processor(SimpleSpanProcessor(UserEventsSpanExporter(prefix=prefix)))
    elif key == "e":
        provider.add_span_processor(SimpleSpanProcessor(OtlpEncodingSpanExporter()))
    elif key == "f":
        devnull = open(os.devnull, "w")  # noqa: SIM115 - closed by the setup
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=devnull)))
        setup.closers.insert(0, devnull.close)
    elif key not in ("b", "g_off"):
        raise ValueError(f"no span configuration {key!r}")
    return setup


def log_setup(key: str) -> Setup:
    """A fresh configuration ``key`` of the log benchmark (no ``g``: samplers are for spans)."""
    if key == "a":
        return Setup(key, log_workload(NoOpLoggerProvider().get_logger("checkout")))
    prefix = f"{PREFIX}_{key}"
    provider = LoggerProvider(resource=RESOURCE)
    setup = Setup(key, log_workload(provider.get_logger("checkout", "1.0.0")))
    setup.closers.append(provider.shutdown)
    if key in ("c", "d", "d_floor", *EVENTHEADER_KEYS):
        exporter = UserEventsLogExporter(prefix=prefix, format=exporter_format(key))
        provider.add_log_record_processor(UserEventsLogRecordProcessor(exporter))
        if key == "d_floor":
            fixed_payload(exporter)
        if key in ("d", "d_floor", "d_eh"):
            info = exporter.registration_for(SeverityNumber.INFO.value)
            listening = Listening(listened(exporter, [info]), prefix)
            setup.closers.append(listening.close)
    elif key == "c_floor":
        provider.add_log_record_processor(NothingLogRecordProcessor())
    elif key == "c_batch":
        exporter = UserEventsLogExporter(prefix=prefix)
        provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    elif key == "c_simple":
        exporter = UserEventsLogExporter(prefix=prefix)
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    elif key == "e":
        provider.add_log_record_processor(SimpleLogRecordProcessor(OtlpEncodingLogExporter()))
    elif key == "f":
        devnull = open(os.devnull, "w")  # noqa: SIM115 - closed by the setup
        exporter = ConsoleLogRecordExporter(out=devnull)
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        setup.closers.insert(0, devnull.close)
    elif key != "b":
        raise ValueError(f"no log configuration {key!r}")
    return setup


def logging_workload(logger: logging.Logger) -> Callable[[int], None]:
    info = logger.info

    def run(n: int) -> None:
        for number in range(n):
            info("cart %s loaded", number)

    return run


def logging_setup(key: str) -> Setup:
    """A fresh configuration ``key`` of the ``logging`` benchmark: a logger of its own that
    passes INFO and propagates nowhere."""
    logger = logging.getLogger(f"bench.logging.{key}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    setup = Setup(key, logging_workload(logger))
    if key == "b":
        return setup
    provider = LoggerProvider(resource=RESOURCE)
    exporter = UserEventsLogExporter(prefix=f"{PREFIX}_l{key}")
    provider.add_log_record_processor(UserEventsLogRecordProcessor(exporter))
    if key in ("h", "d"):
        handler: logging.Handler = UserEventsLoggingHandler(exporter, logger_provider=provider)
    elif key == "h_sdk":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            handler = LoggingHandler(logger_provider=provider)
    else:
        raise ValueError(f"no logging configuration {key!r}")
    logger.addHandler(handler)
    setup.closers += [provider.shutdown, lambda: logger.removeHandler(handler)]
    if key == "d":
        registrations = [exporter.registrations["info"], exporter._writer.registrations["resource"]]
        setup.closers.append(Listening(registrations, f"{PREFIX}_l{key}").close)
    return setup


HOST_KEYS = ("a", "b", "c", "c_floor", "c_batch", "c_simple", "c_eh", "e", "f", "g", "g_off",
             "h", "h_sdk")  # fmt: skip
GUEST_KEYS = ("a", "b", "c", "c_floor", "c_eh", "d", "d_floor", "d_eh", "e", "f", "g", "g_off",
              "h", "h_sdk")  # fmt: skip
SETUPS = {"spans": span_setup, "logs": log_setup, "logging": logging_setup}


def keys_for(signal: str, keys: Sequence[str]) -> list[str]:
    return [k for k in keys if k in LABELS[signal]]


def quiet() -> None:
    """The exporters warn once when user_events is unavailable (on the host): expected."""
    logging.getLogger("opentelemetry_exporter_userevents").setLevel(logging.ERROR)
