# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Resources announced on their own tracepoint instead of repeated in every record.

Spans and logs carry a 64-bit ``resource_id``. The resource itself is written to
``<prefix>_resource``:

- at the first export after that tracepoint becomes enabled, before the records of that
  export, so a reader that enables it no later than the span or log tracepoints knows the
  resource before the first record it reads;
- again every ``interval`` while it stays enabled, so a reader that attached some other
  way, or lost records to an overrun, learns it within one interval of the next export.
"""

from __future__ import annotations

import threading
import time

from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents import _forksafe
from opentelemetry_exporter_userevents._export.redaction import Redactor, redact_attributes
from opentelemetry_exporter_userevents._export.writer import EventWriter
from opentelemetry_exporter_userevents.abi.user_events import Registration, enable_word
from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record.plain_text import encode_plain
from opentelemetry_exporter_userevents.record.resource_id import hash_resource
from opentelemetry_exporter_userevents.record.schema import RESOURCE


class ResourceAnnouncer:
    """Keeps the resource record of each resource seen, and writes it when due."""

    def __init__(
        self,
        writer: EventWriter,
        registration: Registration | None,
        interval_ms: int,
        redact: Redactor | None = None,
    ):
        self._writer = writer
        self._redact = redact
        self._registration = registration
        self._word = enable_word(registration)
        self._interval_ms = interval_ms
        self._interval_s = interval_ms / 1000
        self._lock = threading.Lock()
        _forksafe.register(self)
        self._known: dict[int, tuple[Resource, int, bytes]] = {}  # id(resource) -> ...
        self._last_written: dict[int, float] = {}  # resource_id -> monotonic time
        self._was_enabled = False

    def resource_id(self, resource: Resource) -> int:
        """The id of ``resource`` (computed once per Resource object)."""
        return self._entry(resource)[0]

    def _entry(self, resource: Resource) -> tuple[int, bytes]:
        """(id, resource record payload) of ``resource``, cached per Resource object."""
        known = self._known.get(id(resource))
        if known is not None and known[0] is resource:
            return known[1], known[2]
        if self._redact is None:
            text = anyvalue.encode(dict(resource.attributes))
        else:
            text = anyvalue.encode(redact_attributes(resource.attributes, self._redact))
        attributes = text.encode()
        schema_url = encode_plain(resource.schema_url or "")
        rid = hash_resource(attributes, schema_url)
        payload = RESOURCE.pack((rid, self._interval_ms), (attributes, schema_url))
        with self._lock:
            if len(self._known) > 64:  # resources are few; never let this grow unbounded
                self._known.clear()
            self._known[id(resource)] = (resource, rid, payload)
        return rid, payload

    def announce(self, resource: Resource) -> int:
        """Write ``resource``'s record if due; return its id."""
        rid, payload = self._entry(resource)
        if not self._word[0]:
            self._was_enabled = False
            return rid
        now = time.monotonic()
        if self._was_enabled:  # the common case, without the lock: written, and not due
            last = self._last_written.get(rid)
            if last is not None and now - last < self._interval_s:
                return rid
        with self._lock:
            became_enabled = not self._was_enabled
            if became_enabled:
                self._was_enabled = True
                self._last_written.clear()
            last = self._last_written.get(rid)
            due = last is None or now - last >= self._interval_s
            if due:
                self._last_written[rid] = now
        if due and self._registration is not None:
            self._writer.write(self._registration, payload)
        return rid
