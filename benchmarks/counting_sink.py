# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Where the collector's OTLP exporter posts, for the collector load benchmark: each
span (by span id) and log record (by body) counted per service, so that a record delivered
twice shows, without keeping the requests (minutes of load would not fit the guest)."""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from collections import Counter

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def _service(resource: object) -> str:
    for attribute in resource.attributes:  # type: ignore[attr-defined]
        if attribute.key == "service.name":
            return str(attribute.value.string_value)
    return ""


class CountingSink:
    """``url`` takes ``/v1/traces`` and ``/v1/logs`` (``/v1/metrics`` is taken and not
    counted: the reader's own health); :meth:`counts` gives, for a service, the records
    delivered at least once and the extra deliveries; ``last_at`` when a record last came."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, Counter[bytes]] = {}
        self.errors: list[str] = []
        self.last_at = time.monotonic()
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                        body = gzip.decompress(body)
                    sink._take(self.path, body)
                except Exception as error:  # noqa: BLE001 - kept and reported
                    with sink._lock:
                        sink.errors.append(f"{self.path}: {error!r}")
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _take(self, path: str, body: bytes) -> None:
        keys: list[tuple[str, bytes]] = []
        if path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                service = _service(resource.resource)
                for scope in resource.scope_spans:
                    keys += [(service, b"s" + span.span_id) for span in scope.spans]
        elif path == "/v1/logs":
            logs = ExportLogsServiceRequest.FromString(body)
            for resource_logs in logs.resource_logs:
                service = _service(resource_logs.resource)
                for scope_logs in resource_logs.scope_logs:
                    keys += [
                        (service, b"l" + record.body.string_value.encode())
                        for record in scope_logs.log_records
                    ]
        with self._lock:
            for service, key in keys:
                self._seen.setdefault(service, Counter())[key] += 1
            if keys:
                self.last_at = time.monotonic()

    def counts(self, service: str) -> tuple[int, int]:
        """(records delivered at least once, deliveries past the first) for ``service``."""
        with self._lock:
            seen = self._seen.get(service, Counter())
            return len(seen), sum(seen.values()) - len(seen)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
