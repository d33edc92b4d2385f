# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A new service starting: a span and a log exporter with its own prefix (each announces
itself to a machine-wide reader and waits until it is listened to), one span and one log,
then exit. It prints, as one JSON line, what each exporter's announcement did.

``python -m tests.support.announcing_app PREFIX SERVICE``
"""

from __future__ import annotations

import dataclasses
import json
import sys

from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from opentelemetry_exporter_userevents import (
    UserEventsLogExporter,
    UserEventsLogRecordProcessor,
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)


def main(prefix: str, service: str) -> dict[str, object]:
    resource = Resource({"service.name": service})
    spans = UserEventsSpanExporter(prefix=prefix)
    logs = UserEventsLogExporter(prefix=prefix)
    announced = {
        "span": dataclasses.asdict(spans._writer.announcement),
        "log": dataclasses.asdict(logs._writer.announcement),
    }
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(UserEventsSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(UserEventsLogRecordProcessor(logs))
    with tracer_provider.get_tracer(service).start_as_current_span("start"):
        logger_provider.get_logger(service).emit(
            severity_number=SeverityNumber.INFO, body="started"
        )
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return announced


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
