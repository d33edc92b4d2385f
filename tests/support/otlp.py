# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Comparing OTLP/JSON requests item by item, whatever their batching."""

from __future__ import annotations

import json
from typing import Any


def flatten(requests: list[dict[str, Any]], kind: str) -> dict[str, str]:
    """Each span or log of OTLP/JSON requests, with its resource and scope, by a key
    independent of how the requests were batched."""
    resources_key, scopes_key, items_key = {
        "spans": ("resourceSpans", "scopeSpans", "spans"),
        "logs": ("resourceLogs", "scopeLogs", "logRecords"),
    }[kind]
    flat = {}
    for request in requests:
        for resource in request.get(resources_key, ()):
            for scope in resource.get(scopes_key, ()):
                for item in scope.get(items_key, ()):
                    whole = {
                        "resource": resource["resource"],
                        "resourceSchemaUrl": resource.get("schemaUrl"),
                        "scope": scope.get("scope"),
                        "scopeSchemaUrl": scope.get("schemaUrl"),
                        "item": item,
                    }
                    text = json.dumps(whole, sort_keys=True)
                    key = item.get("spanId", "") + item.get("observedTimeUnixNano", "")
                    key += json.dumps(item.get("body"), sort_keys=True)
                    assert key not in flat
                    flat[key] = text
    return flat


def metric_points(requests: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each metric's data points in order, by resource, scope and the metric without its
    points: a reader writes a request per read, and a read can end inside a collection."""
    points: dict[str, list[Any]] = {}
    for request in requests:
        for resource in request.get("resourceMetrics", ()):
            for scope in resource.get("scopeMetrics", ()):
                for metric in scope.get("metrics", ()):
                    kind = next(k for k, v in metric.items() if isinstance(v, dict))
                    data = {k: v for k, v in metric[kind].items() if k != "dataPoints"}
                    identity = {
                        "resource": resource["resource"],
                        "resourceSchemaUrl": resource.get("schemaUrl"),
                        "scope": scope.get("scope"),
                        "scopeSchemaUrl": scope.get("schemaUrl"),
                        "metric": {k: v for k, v in metric.items() if k != kind},
                        kind: data,
                    }
                    key = json.dumps(identity, sort_keys=True)
                    points.setdefault(key, []).extend(metric[kind]["dataPoints"])
    return points


def of_traces(requests: list[dict[str, Any]], trace_ids: set[str]) -> list[dict[str, Any]]:
    """Only the spans or log records of ``trace_ids`` (an app's), with their resource and
    scope as written: a test keeps one app's records among others."""
    kept = []
    for request in requests:
        spans = "resourceSpans" in request
        resources_key = "resourceSpans" if spans else "resourceLogs"
        scopes_key, items_key = ("scopeSpans", "spans") if spans else ("scopeLogs", "logRecords")
        resources = []
        for resource in request[resources_key]:
            scopes = []
            for scope in resource.get(scopes_key, ()):
                mine = [i for i in scope.get(items_key, ()) if i.get("traceId") in trace_ids]
                if mine:
                    scopes.append({**scope, items_key: mine})
            if scopes:
                resources.append({**resource, scopes_key: scopes})
        if resources:
            kept.append({resources_key: resources})
    return kept


def attribute_value(value: dict[str, Any]) -> Any:
    """An OTLP/JSON AnyValue as Python: ints parsed, arrays as lists, other kinds as given."""
    kind, inner = next(iter(value.items()))
    if kind == "intValue":
        return int(inner)
    if kind == "arrayValue":
        return [attribute_value(v) for v in inner.get("values", [])]
    return inner
