# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Pages cut into the chunks the decode stage hands on (to its workers, or to the native
core in this process), and a capture CPU's chunks decoded a few ahead."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry_exporter_userevents.reader.capture.tracing_data import CaptureError
from opentelemetry_exporter_userevents.reader.pipeline.worker_loop import Decoded
from opentelemetry_exporter_userevents.reader.pipeline.worker_pool import CHUNK_PAGES


def chunks(pages: Sequence[Any], size: int = CHUNK_PAGES) -> Iterator[Sequence[Any]]:
    for first in range(0, len(pages), size):
        yield pages[first : first + size]


def cpu_records(
    pool: Any,
    pages: Iterator[Any],
    formats: Sequence[str],
    ahead: int,
    size: int = CHUNK_PAGES,
) -> Iterator[Decoded]:
    """One CPU's records (in page order), its chunks decoded ``ahead`` at a time, with
    ``formats`` (a capture's: all of them from the start)."""
    tickets: deque[int] = deque()
    chunk: list[Any] = []
    try:
        for page in pages:
            chunk.append(page)
            if len(chunk) >= size:
                tickets.append(pool.submit(chunk, formats))
                chunk = []
                if len(tickets) > ahead:
                    yield from pool.result(tickets.popleft())
    except CaptureError:  # a damaged file: what came before it is still written
        if chunk:
            tickets.append(pool.submit(chunk, formats))
        while tickets:
            yield from pool.result(tickets.popleft())
        raise
    if chunk:
        tickets.append(pool.submit(chunk, formats))
    while tickets:
        yield from pool.result(tickets.popleft())
