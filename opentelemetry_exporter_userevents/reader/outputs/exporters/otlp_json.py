# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OTLP/JSON: ``ExportTraceServiceRequest``, ``ExportLogsServiceRequest`` and
``ExportMetricsServiceRequest`` as JSON lines.

This is what the OpenTelemetry Collector's file exporter writes and its ``otlpjsonfile``
receiver reads: the protobuf JSON mapping with lowerCamelCase names, enums as integers,
64-bit integers as strings, and (unlike plain protobuf JSON) trace and span ids as hex
(OTLP specification, "JSON Protobuf Encoding"). Spans and logs go through the OTLP
exporters' own encoder (opentelemetry-exporter-otlp-proto-common), so the result is the
same as any OTLP exporter would send. The reader's OTLP/JSON output writes the same lines
straight from checked records (:mod:`.otlp_json_direct`), tested equal to these.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from functools import cache
from importlib.util import find_spec
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint, metrics_data

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.metrics.export import MetricsData
    from opentelemetry.sdk.trace import ReadableSpan

_ENCODER = "opentelemetry.exporter.otlp.proto.common"


@cache
def _encoders() -> SimpleNamespace:
    """The OTLP encoder and protobuf's JSON mapping, imported at their first use: the
    direct output writes spans and logs without them, and the reader starts sooner."""
    require()
    from google.protobuf.json_format import MessageToDict  # noqa: PLC0415
    from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import (  # noqa: PLC0415
        encode_metrics,
    )
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs  # noqa: PLC0415
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import (  # noqa: PLC0415
        encode_spans,
    )

    return SimpleNamespace(
        MessageToDict=MessageToDict,
        encode_metrics=encode_metrics,
        encode_logs=encode_logs,
        encode_spans=encode_spans,
    )


T = TypeVar("T")
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def require() -> None:
    """Raise ImportError with the install hint if the OTLP encoder is not installed."""
    try:
        found = find_spec(_ENCODER) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken one
        found = False
    if not found:
        raise ImportError(
            "OTLP/JSON output needs opentelemetry-exporter-otlp-proto-common: "
            "pip install 'opentelemetry-exporter-userevents[reader]'"
        )


def spans_request(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An ExportTraceServiceRequest, as the JSON object OTLP/JSON defines."""
    encoders = _encoders()
    request: dict[str, Any] = encoders.MessageToDict(
        encoders.encode_spans(spans), use_integers_for_enums=True
    )
    for resource_spans in request.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return request


def logs_request(logs: Sequence[ReadableLogRecord]) -> dict[str, Any]:
    """An ExportLogsServiceRequest, as the JSON object OTLP/JSON defines."""
    encoders = _encoders()
    request: dict[str, Any] = encoders.MessageToDict(
        encoders.encode_logs(logs), use_integers_for_enums=True
    )
    for resource_logs in request.get("resourceLogs", ()):
        for scope_logs in resource_logs.get("scopeLogs", ()):
            for record in scope_logs.get("logRecords", ()):
                _hex_ids(record)
    return request


def metrics_request(points: Sequence[MetricPoint]) -> dict[str, Any]:
    """An ExportMetricsServiceRequest of rebuilt points, as the JSON object OTLP/JSON
    defines."""
    return metrics_data_request(metrics_data(points))


def metrics_data_request(data: MetricsData) -> dict[str, Any]:
    """An ExportMetricsServiceRequest of the SDK's MetricsData, as OTLP/JSON."""
    encoders = _encoders()
    message = encoders.encode_metrics(data)
    request: dict[str, Any] = encoders.MessageToDict(message, use_integers_for_enums=True)
    for resource_metrics in request.get("resourceMetrics", ()):
        for scope_metrics in resource_metrics.get("scopeMetrics", ()):
            for metric in scope_metrics.get("metrics", ()):
                for data in metric.values():
                    if not isinstance(data, dict):
                        continue
                    for point in data.get("dataPoints", ()):
                        for exemplar in point.get("exemplars", ()):
                            _hex_ids(exemplar)
    return request


def skipping_unrepresentable(
    request: Callable[[Sequence[T]], dict[str, Any]], items: Sequence[T]
) -> tuple[dict[str, Any] | None, int]:
    """``request(items)``, leaving out the items OTLP cannot carry (the encoder raises, for
    example, on a log body that is an integer beyond 64 bits); and how many were left out.
    The OTLP encoder itself leaves out such attributes, with a logged error."""
    try:
        return request(items), 0
    except Exception:  # noqa: BLE001 - the encoder raises bare Exception for unknown types
        pass
    good = []
    for item in items:
        try:
            request([item])
        except Exception:  # noqa: BLE001
            continue
        good.append(item)
    return (request(good) if good else None), len(items) - len(good)


def dumps(request: dict[str, Any]) -> str:
    """One request as one line of JSON."""
    return json.dumps(request, separators=(",", ":"))  # ASCII: lone surrogates stay valid


def _hex_ids(message: dict[str, Any]) -> None:
    for key in _ID_KEYS:
        if key in message:
            message[key] = base64.b64decode(message[key]).hex()
