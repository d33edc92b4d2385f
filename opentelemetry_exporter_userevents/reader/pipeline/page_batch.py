# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What a source hands the decode stage: pages, and the formats that decode them.

The formats travel with the pages, so no ordering of reads, scans and workers can decode a
page before its format: a batch's formats are taken after its pages were read, and a
source learns a format before it enables the tracepoint (:meth:`.TraceReader.known_formats`),
so every record in the pages has its format in the batch. The worker pool sends a worker
the formats it has not had ahead of the chunk (:meth:`.WorkerPool.submit`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PageBatch:
    """One read of a source."""

    pages: Sequence[tuple[int, bytes]]
    """(cpu, sub-buffer), CPU by CPU, each CPU's in the order the kernel filled them."""
    formats: Sequence[str]
    """Every format text the source knew once these pages were read, in the order it
    learnt them (it only grows from one batch to the next)."""
