# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Where the collector's OTLP exporter posts, for the collector load benchmark: each
span (by span id) and log record (by body) counted per service, so that a record delivered
twice shows, without keeping the requests (minutes of load would not fit the guest)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from tests.support.collector import Sink


def _service(resource: Any) -> str:
    for attribute in resource.attributes:
        if attribute.key == "service.name":
            return str(attribute.value.string_value)
    return ""


class CountingSink(Sink):
    """The tests' sink (``url``; requests decompressed and decoded there) keeping counts
    instead of requests: ``/v1/traces`` and ``/v1/logs`` counted (``/v1/metrics`` is taken
    and not counted: the reader's own health); :meth:`counts` gives, for a service, the
    records delivered at least once and the extra deliveries; ``last_at`` when a record
    last came."""

    def __init__(self) -> None:
        self._seen: dict[str, Counter[bytes]] = {}
        self.last_at = time.monotonic()
        super().__init__()

    def keep(self, path: str, message: Any) -> None:
        keys: list[tuple[str, bytes]] = []
        if path == "/v1/traces":
            for resource in message.resource_spans:
                service = _service(resource.resource)
                for scope in resource.scope_spans:
                    keys += [(service, b"s" + span.span_id) for span in scope.spans]
        elif path == "/v1/logs":
            for resource_logs in message.resource_logs:
                service = _service(resource_logs.resource)
                for scope_logs in resource_logs.scope_logs:
                    keys += [
                        (service, b"l" + record.body.string_value.encode())
                        for record in scope_logs.log_records
                    ]
        with self.lock:
            for service, key in keys:
                self._seen.setdefault(service, Counter())[key] += 1
            if keys:
                self.last_at = time.monotonic()

    def counts(self, service: str) -> tuple[int, int]:
        """(records delivered at least once, deliveries past the first) for ``service``."""
        with self.lock:
            seen = self._seen.get(service, Counter())
            return len(seen), sum(seen.values()) - len(seen)
