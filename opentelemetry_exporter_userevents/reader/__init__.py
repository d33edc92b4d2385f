# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The read side: records from the kernel back into OpenTelemetry spans and logs.

Bytes to spans, in order: :mod:`.trace_reader` (tracefs instance, per-CPU pages) ->
:mod:`.decoder` (pages to records, by each tracepoint's format) -> :mod:`.join_stage`
(records joined to their resources and scopes) -> :mod:`.outputs` (OTLP/JSON, tree view,
exporters); :mod:`.pipeline` wires them once per command. :mod:`.cli` is
``otel-userevents``. It uses the kernel contract (``abi``) and the wire contract
(``record``), and nothing of the write side.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder, TraceRecord
    from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
    from opentelemetry_exporter_userevents.reader.live.trace_reader import ReaderError, TraceReader

_MODULES = {
    "ReaderError": "live.trace_reader",
    "JoinStage": "join.join_stage",
    "RecordDecoder": "decode.decoder",
    "TraceReader": "live.trace_reader",
    "TraceRecord": "decode.decoder",
}
"""Imported when first used (PEP 562): ``otel-userevents`` sets its signal handlers
before it imports anything heavy."""

__all__ = ["ReaderError", "JoinStage", "RecordDecoder", "TraceReader", "TraceRecord"]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
