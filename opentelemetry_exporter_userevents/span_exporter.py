# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""UserEventsSpanExporter: spans as ``user_events_multi/<prefix>_span.<id>`` records, or
with ``format="eventheader"`` as Common Schema events on ``<prefix>_L4K<keyword>``."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from opentelemetry_exporter_userevents._export.common_schema_span import (
    encode_span as encode_common_schema_span,
)
from opentelemetry_exporter_userevents._export.config import EVENTHEADER
from opentelemetry_exporter_userevents._export.exporter_base import Encoder, ExporterBase
from opentelemetry_exporter_userevents._export.redaction import Redactor, redact_span
from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents._export.tracepoint_sets import span_tracepoints
from opentelemetry_exporter_userevents.abi.user_events import Registration

__all__ = ["UserEventsSpanExporter"]


class UserEventsSpanExporter(ExporterBase[ReadableSpan], SpanExporter):
    """Writes each span as one user_events record, only while a tracer listens.

    Constructible with no arguments (settings from ``OTEL_EXPORTER_USER_EVENTS_*``) or
    with keyword arguments (declarative configuration passes its YAML keys). Without
    user_events it logs one warning and exports nothing. ``export`` never raises.
    ``redact(key, value)``, if given, rewrites or removes (returning None) each attribute
    before it is written (see ``_export.redaction``).
    """

    def __init__(
        self,
        *,
        prefix: str | None = None,
        max_record_size: int | None = None,
        resource_interval_millis: int | None = None,
        tracefs: str | None = None,
        user_events_data: str | None = None,
        multi_format: bool | None = None,
        format: str | None = None,  # noqa: A002 - the option's name everywhere
        redact: Redactor | None = None,
        meter_provider: MeterProvider | None = None,
        **kwargs: Any,
    ) -> None:
        config = self.settings(
            prefix=prefix,
            max_record_size=max_record_size,
            resource_interval_millis=resource_interval_millis,
            tracefs=tracefs,
            user_events_data=user_events_data,
            multi_format=multi_format,
            format=format,
            **kwargs,
        )
        super().__init__(span_tracepoints(config), config, redact, meter_provider)
        self.registration = self._writer.registrations["span"]
        self._encode: Encoder | None = None
        """The Common Schema encoder with ``format="eventheader"``; None: our own format's
        (``encode_span``, looked up at each export)."""
        if config.format == EVENTHEADER:
            self._encode = partial(encode_common_schema_span, role=self._cloud_role)

    @property
    def enabled(self) -> bool:
        """True while a tracer listens to the span tracepoint (one memory read)."""
        return self.registration is not None and self.registration.enabled

    def _route(self, span: ReadableSpan) -> Registration | None:
        return self.registration

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode = encode_span if self._encode is None else self._encode
        if self._export_items(spans, self._route, encode, redact_span):
            return SpanExportResult.SUCCESS
        return SpanExportResult.FAILURE

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._shut_down()
