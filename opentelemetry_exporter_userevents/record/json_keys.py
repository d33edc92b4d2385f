# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The JSON keys of span events, span links and instrumentation scopes, defined once for
the writer and the reader (docs/schema.md)."""

from __future__ import annotations

NAME = "name"
TIME_NS = "time_ns"
ATTRIBUTES = "attributes"
DROPPED = "dropped"
"""Attributes the SDK dropped from this event or link, plus any left out as unencodable."""
TRACE_ID = "trace_id"
SPAN_ID = "span_id"
TRACE_FLAGS = "trace_flags"
TRACE_STATE = "trace_state"
IS_REMOTE = "is_remote"
VERSION = "version"
SCHEMA_URL = "schema_url"

EVENT_KEYS = (NAME, TIME_NS, ATTRIBUTES, DROPPED)
"""An event: ``{name, time_ns, attributes, dropped}``, in this order."""
LINK_KEYS = (TRACE_ID, SPAN_ID, TRACE_FLAGS, TRACE_STATE, IS_REMOTE, ATTRIBUTES, DROPPED)
"""A link, in this order."""
SCOPE_KEYS = (NAME, VERSION, SCHEMA_URL, ATTRIBUTES)
"""An instrumentation scope, in this order."""


def json_template(keys: tuple[str, ...]) -> str:
    """A ``%`` template of a JSON object with these keys, each value a ``%s`` to fill with
    its JSON text: the writer's fast path builds events and links with it."""
    return "{" + ",".join(f'"{key}":%s' for key in keys) + "}"
