# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the C++ test writers (tests/support/peers/) wrote, as the OTLP that
docs/common-schema.md says a reader rebuilds from it, and OTLP/JSON items in the same
plain form, so a kernel test compares the two field by field: each span and log as a dict
of its fields (ids hex, times in nanoseconds, attributes as Python values)."""

from __future__ import annotations

import calendar
import re
from typing import Any

_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z\Z")
RENAMED = {"httpMethod": "http.request.method", "httpStatusCode": "http.response.status_code"}
"""The PartB fields the Rust span writer writes, by their semantic-convention names."""


def nanoseconds(text: str) -> int:
    """An RFC 3339 UTC time (as the writers write them) in ns since the epoch."""
    match = _RFC3339.match(text)
    assert match is not None, text
    *fields, fraction = match.groups()
    seconds = calendar.timegm(tuple(int(f) for f in fields) + (0, 0, 0))
    return seconds * 10**9 + int((fraction or "").ljust(9, "0"))


def value(any_value: dict[str, Any]) -> Any:
    """An OTLP/JSON AnyValue as a Python value."""
    if not any_value:
        return None
    ((kind, inner),) = any_value.items()
    if kind == "intValue":
        return int(inner)
    if kind == "arrayValue":
        return [value(item) for item in inner.get("values", ())]
    if kind == "kvlistValue":
        return {kv["key"]: value(kv.get("value", {})) for kv in inner.get("values", ())}
    return inner


def attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: value(kv.get("value", {})) for kv in items}


def items(requests: list[dict[str, Any]], kind: str) -> list[tuple[dict[str, Any], dict]]:
    """(resource attributes, span or log record) of OTLP/JSON requests."""
    resources_key, scopes_key, items_key = {
        "spans": ("resourceSpans", "scopeSpans", "spans"),
        "logs": ("resourceLogs", "scopeLogs", "logRecords"),
    }[kind]
    return [
        (attributes(resource.get("resource", {}).get("attributes", [])), item)
        for request in requests
        for resource in request.get(resources_key, ())
        for scope in resource.get(scopes_key, ())
        for item in scope.get(items_key, ())
    ]


def span_fields(resource: dict[str, Any], span: dict[str, Any]) -> dict[str, Any]:
    status = span.get("status", {})
    return {
        "resource": resource,
        "name": span["name"],
        "traceId": span["traceId"],
        "spanId": span["spanId"],
        "parentSpanId": span.get("parentSpanId") or None,
        "start": int(span["startTimeUnixNano"]),
        "end": int(span["endTimeUnixNano"]),
        "kind": span.get("kind", 0),
        "status": (status.get("code", 0), status.get("message", "")),
        "attributes": attributes(span.get("attributes", [])),
        "links": [(link["traceId"], link["spanId"]) for link in span.get("links", ())],
    }


def rust_span(line: dict[str, Any]) -> dict[str, Any]:
    """A line the Rust-span writer printed, as :func:`span_fields` of the span it is."""
    renamed = {RENAMED[k]: line[k] for k in RENAMED if line[k] is not None}
    return {
        "resource": {"service.name": line["role"], "service.instance.id": line["roleInstance"]},
        "name": line["name"],
        "traceId": line["traceId"],
        "spanId": line["spanId"],
        "parentSpanId": line["parentId"],
        "start": nanoseconds(line["startTime"]),
        "end": nanoseconds(line["time"]),
        "kind": line["kind"] + 1,  # OTLP's numbering: 1 internal ... 5 consumer
        "status": (0, "") if line["success"] else (2, line["statusMessage"]),
        "attributes": {**renamed, **line["attributes"]},
        "links": [(link["toTraceId"], link["toSpanId"]) for link in line["links"]],
    }


def log_fields(resource: dict[str, Any], log: dict[str, Any]) -> dict[str, Any]:
    return {
        "resource": resource,
        "time": int(log.get("timeUnixNano", 0)),
        "traceId": log.get("traceId") or None,
        "spanId": log.get("spanId") or None,
        "severityNumber": log.get("severityNumber", 0),
        "severityText": log.get("severityText", ""),
        "body": value(log.get("body", {})),
        "eventName": log.get("eventName", ""),
        "attributes": attributes(log.get("attributes", [])),
    }


def dotnet_log(line: dict[str, Any]) -> dict[str, Any]:
    """A line the .NET-log writer printed, as :func:`log_fields` of the log it is."""
    extra = {
        "exception.type": line["exceptionType"],
        "exception.message": line["exceptionMessage"],
        "event_id": line["eventId"],
    }
    properties = line["env_properties"]
    return {
        "resource": {"service.name": line["role"], "service.instance.id": line["roleInstance"]},
        "time": nanoseconds(line["time"]),
        "traceId": line["traceId"],
        "spanId": line["spanId"],
        "severityNumber": line["severityNumber"],
        "severityText": line["severityText"],
        "body": line["body"],
        "eventName": line["name"],
        "attributes": {
            **{k: v for k, v in extra.items() if v is not None},
            "ids": line["ids"],
            "tags": line["tags"],
            "Id": line["Id"],
            "tenant": properties["tenant"],
            "n": properties["n"],
            "deep.x": properties["deep"]["x"],
        },
    }
