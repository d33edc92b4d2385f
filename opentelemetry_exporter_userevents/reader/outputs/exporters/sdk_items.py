# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Which items of an output's batch are SDK spans and SDK log records, told without
importing the SDK's trace and logs modules.

No SDK span or log record exists until something that builds them (:mod:`.sdk_objects`, a
test, an exporter) has imported those modules, so while neither is in ``sys.modules`` no
item is one: a reader that writes OTLP/JSON starts without loading them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.trace import ReadableSpan

SDK_TRACE_MODULE = "opentelemetry.sdk.trace"
SDK_LOGS_MODULE = "opentelemetry.sdk._logs"


def _class(module: str, name: str) -> type[Any] | None:
    loaded = sys.modules.get(module)
    found = getattr(loaded, name, None) if loaded is not None else None
    return found if isinstance(found, type) else None


def is_sdk_span(item: Any) -> bool:
    span = _class(SDK_TRACE_MODULE, "ReadableSpan")
    return span is not None and isinstance(item, span)


def is_sdk_log(item: Any) -> bool:
    log = _class(SDK_LOGS_MODULE, "ReadableLogRecord")
    return log is not None and isinstance(item, log)


def sdk_spans_and_logs(
    items: Sequence[Any],
) -> tuple[list[ReadableSpan], list[ReadableLogRecord]]:
    """The SDK spans of ``items`` and their SDK log records, each in order."""
    span, log = (
        _class(SDK_TRACE_MODULE, "ReadableSpan"),
        _class(SDK_LOGS_MODULE, "ReadableLogRecord"),
    )
    spans: list[ReadableSpan] = []
    logs: list[ReadableLogRecord] = []
    if span is not None:
        spans = [i for i in items if isinstance(i, span)]
    if log is not None:
        logs = [i for i in items if isinstance(i, log)]
    return spans, logs
