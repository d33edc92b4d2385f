# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The live source: a tracefs instance's pages as :class:`.PageBatch` es, and the writers'
new tracepoints found between reads (``record``)."""

from __future__ import annotations

from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from opentelemetry_exporter_userevents.reader.pipeline.page_batch import PageBatch


class LiveSource:
    """Reads :class:`.TraceReader`'s pages; never blocks."""

    def __init__(self, reader: TraceReader) -> None:
        self.reader = reader

    def read(self) -> PageBatch:
        """The pages available now, and the formats known once they were read."""
        pages = self.reader.read_cpu_pages()
        return PageBatch(pages, self.reader.known_formats() if pages else ())

    def discover(self) -> None:
        """Enable the tracepoints of services announced or found since (when due): after
        a read's pages are decoded in-process, so a record still in the buffer is decoded
        with the format it was written with, even if a new tracepoint takes its id."""
        self.reader.discover()
