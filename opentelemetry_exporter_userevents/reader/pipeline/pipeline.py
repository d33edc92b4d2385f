# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's pipeline: source -> decode stage -> join (its views plugged in) ->
delivery, built once by each command (``record``, ``decode``, ``decode --kernel``) and
the only path a record takes.

Each record visits each stage once, in order: the source reads pages (or a capture's
records), the decode stage turns them into records by timestamp (in-process or in its
workers), the kernel view, when there is one, reads the kernel's events up to them and
lists their writers, the join joins them to their resources and scopes (the process view
and the kernel view are its plug-ins: :class:`.ProcessViews`, the span enricher), and the
output delivers what the join made ready. See docs/reader-pipeline.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from opentelemetry_exporter_userevents.reader.join.join_stage import Incoming, JoinStage
from opentelemetry_exporter_userevents.reader.outputs.output import Output
from opentelemetry_exporter_userevents.reader.pipeline.decode_stage import DecodeStage
from opentelemetry_exporter_userevents.reader.pipeline.live_source import LiveSource

if TYPE_CHECKING:  # imported when chosen (--kernel)
    from opentelemetry_exporter_userevents.reader.views.kernel_view import KernelView


class Pipeline:
    """The stages of one command, wired once."""

    def __init__(
        self,
        decode: DecodeStage,
        join: JoinStage,
        delivery: Output,
        source: LiveSource | None = None,
        kernel: KernelView | None = None,
    ) -> None:
        """``source``: a live one (``record``); a capture's records are handed to
        :meth:`run` instead. ``kernel``: the live kernel view, whose events are read
        before each batch of records is joined (a capture's are fed by its source)."""
        self.source = source
        self.decode = decode
        self.join = join
        self.delivery = delivery
        self.kernel = kernel

    def step(self, last: bool = False, deadline: float | None = None) -> bool:
        """One read of the live source through every stage; whether it was busy: a CPU
        gave more than one page (a page filled since the last read), so the caller reads
        again at once; else it idles a poll interval (a read of a page or less per CPU,
        over and over, cost the reader most of its CPU at a low rate: a read's own work
        spread over a record or two).
        ``last`` (the stop): also every record still in the decode stage, by ``deadline``;
        then a worker that died or failed is raised (:class:`.WorkerError`), once every
        record is delivered."""
        assert self.source is not None
        batch = self.source.read()
        records = self.decode.take(batch, last, deadline if last else None)
        self.source.discover()
        self.deliver(records)
        if last:
            self.deliver(self.decode.drain(deadline))
            error = self.decode.error()
            if error is not None:
                raise error
        return len(batch.pages) > len({cpu for cpu, _page in batch.pages})

    def run(self, batches: Iterable[Sequence[Incoming]]) -> None:
        """A capture's records (by timestamp, in batches: :func:`.capture.decode.batches`)
        through the join and delivery; then a worker that died or failed is raised."""
        for batch in batches:
            self.deliver(batch)
        error = self.decode.error()
        if error is not None:
            raise error

    def deliver(self, records: Sequence[Incoming]) -> None:
        """Decoded records to the kernel view (live), the join, and the output."""
        if self.kernel is not None:
            self.kernel.take_writers({record.pid for record in records})
        self.delivery.write(self.join.add(records))

    def flush(self) -> None:
        """What the join still holds (records waiting for their resource), delivered."""
        self.delivery.write(self.join.flush())

    def close(self, deadline: float | None = None) -> None:
        """Stop the decode stage's workers (by ``deadline``). Idempotent."""
        self.decode.close(deadline)
