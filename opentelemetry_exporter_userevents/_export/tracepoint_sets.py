# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The tracepoints a span or log exporter registers, in the format its settings choose:
ours (``<prefix>_span``, ``<prefix>_log_<class>``) or EventHeader's
(``<provider>_L<level>K<keyword>``, the prefix being the provider). The sampler registers the
same span tracepoint, so that its enable bit is the exporter's."""

from __future__ import annotations

from opentelemetry_exporter_userevents._export.common_schema_envelope import SPAN_LEVEL, level
from opentelemetry_exporter_userevents._export.config import EVENTHEADER, ExporterConfig
from opentelemetry_exporter_userevents.record import eventheader
from opentelemetry_exporter_userevents.record.schema import LOG, SPAN, Schema
from opentelemetry_exporter_userevents.record.tracepoints import (
    SEVERITY_CLASSES,
    log_tracepoint,
    severity_class,
    span_tracepoint,
)

Tracepoints = dict[str, tuple[str, Schema]]
"""Key -> (tracepoint base name, schema), as EventWriter takes them."""


def span_tracepoints(config: ExporterConfig) -> Tracepoints:
    """``{"span": ...}``."""
    if config.format == EVENTHEADER:
        name = eventheader.tracepoint_name(config.prefix, SPAN_LEVEL, config.eventheader_keyword)
        return {"span": (name, eventheader.TRACEPOINT)}
    return {"span": (span_tracepoint(config.prefix), SPAN)}


def log_tracepoints(config: ExporterConfig) -> tuple[Tracepoints, list[str]]:
    """The log tracepoints, and the key of each severity number 0..24: a severity class
    (``info``, ...) in our format, a level (``L4``, ...) in EventHeader's."""
    if config.format == EVENTHEADER:
        keyword = config.eventheader_keyword
        name = eventheader.tracepoint_name
        tracepoints = {
            f"L{n}": (name(config.prefix, n, keyword), eventheader.TRACEPOINT)
            for n in eventheader.LEVELS
        }
        return tracepoints, [f"L{level(n)}" for n in range(25)]
    tracepoints = {cls: (log_tracepoint(config.prefix, cls), LOG) for cls in SEVERITY_CLASSES}
    return tracepoints, [severity_class(n) for n in range(25)]
