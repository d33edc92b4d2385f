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
