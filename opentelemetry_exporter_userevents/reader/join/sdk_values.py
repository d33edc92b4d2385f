# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Checked values as the SDK keeps them: attribute sequences as tuples, dropped counts in
``BoundedAttributes``, so a rebuilt object encodes as the app's did (resources and scopes
here; spans and logs in outputs/exporters/sdk_objects.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.attributes import BoundedAttributes


def sdk_value(value: Any) -> Any:
    """A decoded value as the SDK stores it: lists become tuples, recursively."""
    if isinstance(value, list):
        return tuple(sdk_value(v) for v in value)
    if isinstance(value, dict):
        return {k: sdk_value(v) for k, v in value.items()}
    return value


def sdk_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Decoded attributes (str keys: the value encoding has no other) as the SDK keeps them."""
    return {k: sdk_value(v) for k, v in attributes.items()}


def bounded_attributes(attributes: Mapping[str, Any], dropped: int = 0) -> BoundedAttributes:
    bounded = BoundedAttributes(maxlen=None, attributes=sdk_attributes(attributes), immutable=True)
    bounded.dropped = dropped
    return bounded
