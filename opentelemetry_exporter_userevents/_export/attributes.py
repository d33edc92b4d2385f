# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Attributes and instrumentation scopes as JSON text, shared by the span and log encoders.

Attributes of plain values (the common case) are written straight to JSON, byte for byte
what the general value encoding writes for them, at a fraction of its cost; anything else
takes the general path, and attributes it cannot encode are left out and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents.record import anyvalue, json_keys


def encode_attributes(attributes: Mapping[str, Any] | None) -> tuple[bytes, int]:
    """Attributes as a JSON object, and how many were dropped for unencodable values."""
    if attributes is None:
        return b"{}", 0
    text = anyvalue.encode_flat(attributes)  # also writes an empty mapping as {}
    if text is not None:
        return text.encode(), 0
    if not attributes:
        return b"{}", 0
    try:
        return anyvalue.encode(attributes, "attributes").encode(), 0
    except anyvalue.UnsupportedValue:
        kept = encodable(attributes)
        return anyvalue.encode(kept).encode(), len(attributes) - len(kept)


def encodable(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes whose key and value the value encoding accepts, in order."""
    return {key: attributes[key] for key in encoded_sizes(attributes)}


def encoded_sizes(attributes: Mapping[str, Any]) -> dict[str, int]:
    """For each attribute the value encoding accepts, the length of ``{key: value}``'s text
    (what it adds to its object's text, with one comma), in order."""
    sizes = {}
    for key, value in attributes.items():
        try:
            sizes[key] = len(anyvalue.encode({key: value}))
        except anyvalue.UnsupportedValue:
            continue
    return sizes


_scopes: dict[int, tuple[InstrumentationScope | None, bytes]] = {}  # id(scope) -> scope, text
_SCOPE_HEAD = json_keys.SCOPE_KEYS[:-1]
assert json_keys.SCOPE_KEYS[-1] == json_keys.ATTRIBUTES


def encode_scope(scope: InstrumentationScope | None) -> bytes:
    """The scope as JSON ``{name, version, schema_url, attributes}`` (cached per scope
    object: a tracer keeps one, and they are few)."""
    known = _scopes.get(id(scope))
    if known is not None and known[0] is scope:
        return known[1]
    if scope is None:
        text = b"{}"
    else:
        attributes, _ = encode_attributes(scope.attributes)
        value = dict(zip(_SCOPE_HEAD, (scope.name, scope.version, scope.schema_url), strict=True))
        head = anyvalue.encode(value).encode()
        text = head[:-1] + b',"' + json_keys.ATTRIBUTES.encode() + b'":' + attributes + b"}"
    if len(_scopes) >= 256:  # never let it grow unbounded
        _scopes.clear()
    _scopes[id(scope)] = (scope, text)  # the reference keeps the id from being reused
    return text
