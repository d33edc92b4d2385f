# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsSpanExporter: spans as ``user_events_multi/<prefix>_span.<id>`` records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from opentelemetry_exporter_userevents.exporter_core import ExporterCore
from opentelemetry_exporter_userevents.redaction import Redactor, redact_span
from opentelemetry_exporter_userevents.schema import SPAN
from opentelemetry_exporter_userevents.spans import encode_span


class UserEventsSpanExporter(ExporterCore, SpanExporter):
    """Writes each span as one user_events record, only while a tracer listens.

    Constructible with no arguments (settings from ``OTEL_EXPORTER_USER_EVENTS_*``) or
    with keyword arguments (declarative configuration passes its YAML keys). Without
    user_events it logs one warning and exports nothing. ``export`` never raises.
    ``redact(key, value)``, if given, rewrites or removes (returning None) each attribute
    before it is written (see ``redaction``).
    """

    def __init__(
        self,
        *,
        prefix: str | None = None,
        max_record_size: int | None = None,
        resource_interval_millis: int | None = None,
        tracefs: str | None = None,
        redact: Redactor | None = None,
        **kwargs: Any,
    ) -> None:
        config = self.settings(
            prefix=prefix,
            max_record_size=max_record_size,
            resource_interval_millis=resource_interval_millis,
            tracefs=tracefs,
            **kwargs,
        )
        super().__init__({"span": SPAN.command(f"{config.prefix}_span")}, config, redact)
        self.registration = self._writer.registrations["span"]

    @property
    def enabled(self) -> bool:
        """True while a tracer listens to the span tracepoint (one memory read)."""
        registration = self.registration
        return (
            registration is not None and registration.enable_words[registration.enable_index] != 0
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        registration = self.registration
        if self._shutdown:
            return SpanExportResult.FAILURE
        if registration is None:  # unavailable (a no-op, warned once) or not registered
            if self._writer.available:
                self._writer.count("dropped_unregistered", len(spans))
            return SpanExportResult.SUCCESS
        if not registration.enable_words[registration.enable_index]:
            self._writer.count("not_listened", len(spans))
            return SpanExportResult.SUCCESS
        max_size = self.config.max_record_size
        redact = self._redact
        for span in spans:
            try:
                resource_id = self._resources.announce(span.resource)
                if redact is not None:
                    span = redact_span(span, redact)
                payload, truncated = encode_span(span, resource_id, max_size)
            except Exception as exc:  # noqa: BLE001 - never into the application
                self._drop_invalid("a span", exc)
                continue
            if truncated:
                self._writer.count("truncated")
            self._writer.write(registration, payload)
        return SpanExportResult.SUCCESS

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._shut_down()
