# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the join (:class:`~.join_stage.JoinStage`: resources, records waiting for theirs,
scopes, counts) takes past the validation boundary, whoever checked the record.

In-process, a span, log or metric point is a checked record (:mod:`.checked_records`).
With ``--workers``, a worker checks and encodes a span or log where it decoded it and
sends back an :class:`EncodedRecord`: the encoded item and the few fields the join reads,
nothing else; or a :class:`RejectedRecord`: the reason it is invalid. Both kinds of
record are :class:`Joinable`, so the join treats them alike and its counts are the same.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedResource,
    CheckedScope,
)


class Joinable(Protocol):
    """The fields the join reads of a span, log or metric point."""

    @property
    def timestamp(self) -> int: ...
    @property
    def pid(self) -> int: ...
    @property
    def tracepoint(self) -> str: ...
    @property
    def resource_id(self) -> int: ...
    @property
    def truncated(self) -> int: ...
    @property
    def scope_text(self) -> str: ...
    @property
    def scope(self) -> CheckedScope | None: ...


class EncodedRecord(NamedTuple):
    """A span or log a worker checked and encoded as an OTLP/JSON item (see
    :mod:`..pipeline.worker_pool`); what the join needs of it, and the item."""

    timestamp: int
    """First: records of several CPUs merge by it, as :class:`.TraceRecord` do."""
    pid: int
    tracepoint: str
    kind: str
    """``span`` or ``log`` (record.tracepoints SPAN_KIND, LOG_KIND)."""
    resource_id: int
    truncated: int
    scope_text: str
    scope: CheckedScope | None
    item: str | bytes | None
    """Its OTLP/JSON item (str), or its OTLP protobuf field (bytes: the native core's, for
    the direct OTLP senders); None where OTLP cannot carry it (the output counts it)."""
    resource: CheckedResource | None = None
    """The resource an EventHeader record's writer named beside it (it has no resource
    record of its own: :mod:`.eventheader_check`), learnt by the join before the record."""


class RejectedRecord(NamedTuple):
    """A record a worker found invalid: the join counts it, by reason and writer pid."""

    timestamp: int
    pid: int
    reason: str
    """From :class:`.InvalidRecord`'s fixed vocabulary."""
