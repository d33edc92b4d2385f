# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A smoke check of an installed wheel with the native core, run from outside the checkout
(cibuildwheel's test-command for each wheel of a release; docs/building.md): the package
and its core are the installed ones, the reader loads the core (not the Python path), the
core decodes an empty run of pages, and the span encoder encodes a span."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import opentelemetry_exporter_userevents as package
from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.reader.native import native_core

CHECKOUT = Path(__file__).resolve().parent.parent


def main() -> int:
    where = Path(str(package.__file__)).resolve()
    if where.is_relative_to(CHECKOUT):
        print(f"the checkout's package is imported ({where}), not the wheel's", file=sys.stderr)
        return 1
    os.environ[native_core.READER_CORE] = "native"  # a core that does not load raises
    choice = native_core.load_core()
    assert choice.core is not None and choice.reason == "native", choice
    core_file = Path(str(sys.modules[native_core._MODULE].__file__)).resolve()
    assert core_file.parent == where.parent / "reader" / "native", core_file
    result = choice.core.decode_pages(b"", [], (0, 8, 16))
    assert (result.pages, result.records, list(result.entries)) == (0, 0, []), result
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("check").start_as_current_span("wheel", attributes={"a": 1}):
        pass
    (span,) = exporter.get_finished_spans()
    payload, _fitted = encode_span(span, 1, 4064)
    assert b"wheel" in payload, payload
    print(f"the native core loads from {core_file.name}; a span encoded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
