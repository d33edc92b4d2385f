# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The log encoder: a ReadableLogRecord as an ``otel_log_<class>`` record (the LOG schema).

Trace id, span id and flags come from the record itself, never from its context: the
batch processor blanks the context (SDK 1.44+). The body may be any value, in the value
encoding; ``null`` is no body. A record too large is cut to fit: texts other than the body
longer than an eighth of the record are shortened with a marker, then attributes are dropped
(counted in dropped_attributes), then texts are shortened further; a body that is cut becomes
a string ending with the marker, with the TRUNCATED_TEXT bit set.
"""

from __future__ import annotations

from opentelemetry.sdk._logs import ReadableLogRecord

from opentelemetry_exporter_userevents._export.attributes import encode_attributes, encode_scope
from opentelemetry_exporter_userevents._export.fit import RecordFitter
from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record.flags import (
    LOG_BODY,
    LOG_EVENT_NAME,
    LOG_SEVERITY_TEXT,
)
from opentelemetry_exporter_userevents.record.plain_text import encode_plain
from opentelemetry_exporter_userevents.record.schema import LOG

_SEVERITY_TEXT, _EVENT_NAME, _BODY, _ATTRIBUTES, _SCOPE = range(5)
_CUTTABLE = (_SEVERITY_TEXT, _EVENT_NAME, _SCOPE)


def severity_value(number: object) -> int:
    """A record's ``severity_number`` as an int: a ``SeverityNumber``, or the plain int the
    SDK keeps when it is given one; None (unset) is 0. Raises ValueError for anything else
    (the export loop counts the record in dropped_invalid)."""
    try:
        value = number._value_  # type: ignore[attr-defined]  # a plain read, unlike .value
    except AttributeError:
        value = 0 if number is None else number
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"severity_number is not a SeverityNumber or an int: {type(value)!r}")
    if not 0 <= value <= 24:
        raise ValueError(f"severity_number out of 0..24: {value}")
    return value


def severity_number(readable: ReadableLogRecord) -> int:
    return severity_value(readable.log_record.severity_number)


def encode_log(readable: ReadableLogRecord, resource_id: int, max_size: int) -> tuple[bytes, bool]:
    """The record payload of a log record, and whether it had to be cut to fit.

    Raises anyvalue.UnsupportedValue if the body cannot be encoded (the caller counts
    the record as dropped).
    """
    record = readable.log_record
    severity_text = record.severity_text
    event_name = record.event_name
    body = record.body
    attributes, bad_attributes = encode_attributes(record.attributes)
    texts = [
        encode_plain(severity_text or ""),
        encode_plain(event_name or ""),
        anyvalue.encode(body, "body").encode(),
        attributes,
        encode_scope(readable.instrumentation_scope),
    ]
    dropped = readable.dropped_attributes + bad_attributes
    truncated = 0
    if _LOG_OVERHEAD + sum(map(len, texts)) > max_size:
        fitter = RecordFitter(LOG, texts, max_size)
        fitter.cap_texts(_CUTTABLE)
        dropped += fitter.drop_attributes(_ATTRIBUTES, record.attributes)
        fitter.cut_body(_BODY)
        fitter.cut_texts(_CUTTABLE)
        truncated = fitter.truncated
    fixed = (
        record.timestamp or 0,
        record.observed_timestamp or 0,
        resource_id,
        b"%032x" % (record.trace_id or 0),
        b"%016x" % (record.span_id or 0),
        dropped,
        severity_value(record.severity_number),
        int(record.trace_flags or 0),
        (LOG_SEVERITY_TEXT if severity_text is not None else 0)
        | (LOG_EVENT_NAME if event_name is not None else 0)
        | (LOG_BODY if body is not None else 0),
        truncated,
    )
    return LOG.pack(fixed, texts), bool(truncated)


_LOG_OVERHEAD = LOG.size([b""] * len(LOG.texts))
"""The payload size of a log record whose texts are all empty: the fixed fields and NULs."""
