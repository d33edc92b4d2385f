# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The read side: records from the kernel back into OpenTelemetry spans and logs.

Bytes to spans, in order: :mod:`.trace_reader` (tracefs instance, per-CPU pages) ->
:mod:`.decoder` (pages to records, by each tracepoint's format) -> :mod:`.rebuild`
(records to ``ReadableSpan`` and ``ReadableLogRecord``) -> :mod:`.outputs` (OTLP/JSON,
tree view, exporters). :mod:`.cli` is ``otel-userevents``. It uses the kernel contract
(``abi``) and the wire contract (``record``), and nothing of the write side.
"""

from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder, TraceRecord
from opentelemetry_exporter_userevents.reader.join.rebuild import Rebuilder
from opentelemetry_exporter_userevents.reader.live.trace_reader import ReaderError, TraceReader

__all__ = ["ReaderError", "Rebuilder", "RecordDecoder", "TraceReader", "TraceRecord"]
