# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The validation boundary for EventHeader records: a record's event decoded
(:mod:`.eventheader`) and mapped (:mod:`.common_schema`) to a checked span or log, or one
:class:`.InvalidRecord` whose reason is from the decoder's or the mapping's fixed
vocabulary, never the writer's text.

An EventHeader event carries no resource id: what its writer says of its resource (PartA's
``ext_cloud_role``...) comes with it. So the checker gives a :class:`.CheckedResource` beside
each record, whose id is a hash of those attributes in a domain of its own (no EventHeader
writer can make the id of a resource one of our exporters announced), and the record joins
it by that id as our records join theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    Attributes,
    CheckedLog,
    CheckedResource,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.decode.common_schema import map_event
from opentelemetry_exporter_userevents.reader.decode.eventheader import decode_event
from opentelemetry_exporter_userevents.reader.decode.eventheader_name import (
    parse_tracepoint_name,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import EVENT
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    EventHeaderError,
    TracepointName,
)
from opentelemetry_exporter_userevents.reader.decode.validation import InvalidRecord
from opentelemetry_exporter_userevents.record.resource_id import hash_resource

MAX_NAMES = 1024
"""Tracepoint names kept parsed; past this the cache starts again."""
MAX_RESOURCES = 1024
"""Resources kept built, by their attributes' text; past this the cache starts again."""
_DOMAIN = b"eventheader\0"


def resource_id(text: str) -> int:
    """The id of an EventHeader writer's resource, from its attributes' text."""
    return hash_resource(_DOMAIN + text.encode("utf-8", "surrogatepass"), b"")


class EventHeaderChecker:
    """Decodes and maps EventHeader records; tracepoint names and resources, which
    repeat, are parsed and built once (bounded caches)."""

    def __init__(self) -> None:
        self._names: dict[str, TracepointName] = {}
        self._resources: dict[str, CheckedResource] = {}

    def check(
        self, values: Mapping[str, Any], timestamp: int, pid: int, tracepoint: str
    ) -> tuple[CheckedSpan | CheckedLog, CheckedResource]:
        """The checked record of an EventHeader :class:`.TraceRecord`'s values, joined to
        the resource beside it by id. Raises :class:`.InvalidRecord`."""
        try:
            event = decode_event(self._name(tracepoint), values[EVENT])
        except EventHeaderError as error:
            raise InvalidRecord(error.reason) from None
        mapped = map_event(event, timestamp, pid, tracepoint)
        resource = self._resource(mapped.resource)
        return mapped.record._replace(resource_id=resource.resource_id), resource

    def _name(self, tracepoint: str) -> TracepointName:
        name = self._names.get(tracepoint)
        if name is None:
            name = parse_tracepoint_name(tracepoint)
            if len(self._names) >= MAX_NAMES:
                self._names.clear()
            self._names[tracepoint] = name
        return name

    def _resource(self, attributes: Attributes) -> CheckedResource:
        key = repr(sorted(attributes.items()))
        resource = self._resources.get(key)
        if resource is None:
            resource = CheckedResource(resource_id(key), attributes, "")
            if len(self._resources) >= MAX_RESOURCES:
                self._resources.clear()
            self._resources[key] = resource
        return resource
