# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A small instrumented service whose spans and logs become user_events.

Run it, then, as root, enable its tracepoints and watch them:

    python examples/app.py --count 1000 &
    echo 1 | tee /sys/kernel/tracing/events/user_events_multi/otel_*/enable
    cat /sys/kernel/tracing/trace_pipe
"""

import argparse
import logging
import random
import time

from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)

try:  # the SDK's handler moved to opentelemetry-instrumentation-logging; either works here
    from opentelemetry.sdk._logs import LoggingHandler
except ImportError:  # pragma: no cover
    LoggingHandler = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10, help="requests to serve")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between requests")
    parser.add_argument(
        "--wait-for-listener", type=float, default=0, metavar="SECONDS",
        help="before serving, wait up to this long for a tracer to attach to otel_span",
    )  # fmt: skip
    options = parser.parse_args()

    resource = Resource.create({"service.name": "checkout", "service.version": "1.0.0"})
    tracer_provider = TracerProvider(resource=resource)
    span_exporter = UserEventsSpanExporter()
    tracer_provider.add_span_processor(UserEventsSpanProcessor(span_exporter))
    trace.set_tracer_provider(tracer_provider)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(UserEventsLogRecordProcessor(UserEventsLogExporter()))
    set_logger_provider(logger_provider)
    log = logging.getLogger("checkout")
    log.setLevel(logging.INFO)
    if LoggingHandler is not None:
        log.addHandler(LoggingHandler(logger_provider=logger_provider))

    deadline = time.monotonic() + options.wait_for_listener
    while not span_exporter.enabled and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel sets the enable bit when a tracer attaches
    tracer = trace.get_tracer("checkout.http", "1.0.0")
    for number in range(options.count):
        with tracer.start_as_current_span(
            "GET /cart/{id}", kind=trace.SpanKind.SERVER,
            attributes={"http.request.method": "GET", "url.path": f"/cart/{number}"},
        ) as span:  # fmt: skip
            with tracer.start_as_current_span("SELECT cart", kind=trace.SpanKind.CLIENT):
                time.sleep(random.uniform(0.001, 0.005))
            span.add_event("cart loaded", {"items": number % 5})
            if number % 4 == 3:
                span.set_status(Status(StatusCode.ERROR, "payment service unavailable"))
                log.error("checkout %d failed", number)
            else:
                log.info("checkout %d done", number)
        time.sleep(options.interval)
    tracer_provider.shutdown()
    logger_provider.shutdown()


if __name__ == "__main__":
    main()
