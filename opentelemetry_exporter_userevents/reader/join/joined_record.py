# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the join hands an output that writes spans and logs itself (OTLP/JSON, protobuf):
each record with the resource and scope objects it was joined to, no SDK object."""

from __future__ import annotations

from typing import NamedTuple

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents.reader.decode.checked_records import CheckedLog, CheckedSpan
from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord
from opentelemetry_exporter_userevents.record.tracepoints import SPAN_KIND


class JoinedRecord(NamedTuple):
    """A span or log with the resource and scope objects it was joined to (the join_stage
    keeps one per distinct value): what a ReadableSpan or ReadableLogRecord would be built
    from; with ``--workers``, its OTLP/JSON item (:class:`.EncodedRecord`) instead."""

    checked: CheckedSpan | CheckedLog | EncodedRecord
    resource: Resource
    scope: InstrumentationScope | None

    @property
    def is_span(self) -> bool:
        checked = self.checked
        return type(checked) is CheckedSpan or (
            type(checked) is EncodedRecord and checked.kind == SPAN_KIND
        )
