# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A ReadableLogRecord as an ``otel_log_<class>`` record (the LOG schema).

Trace id, span id and flags come from the record itself, never from its context: the
batch processor blanks the context (SDK 1.44+). The body may be any value, in the value
encoding; ``null`` is no body. A record too large is cut to fit: texts other than the body
longer than an eighth of the record are shortened with a marker, then attributes are dropped
(counted in dropped_attributes), then texts are shortened further; a body that is cut becomes
a string ending with the marker, with the TRUNCATED_TEXT bit set.
"""

from __future__ import annotations

from opentelemetry.sdk._logs import ReadableLogRecord

from opentelemetry_exporter_userevents import anyvalue
from opentelemetry_exporter_userevents.schema import (
    LOG,
    TRUNCATED_ATTRIBUTES,
    TRUNCATED_TEXT,
    encode_plain,
)
from opentelemetry_exporter_userevents.spans import (
    cut_text,
    drop_largest,
    encode_attributes,
    encode_scope,
)

FLAG_SEVERITY_TEXT = 1
FLAG_EVENT_NAME = 2
FLAG_BODY = 4

_SEVERITY_TEXT, _EVENT_NAME, _BODY, _ATTRIBUTES, _SCOPE = range(5)


def severity_number(readable: ReadableLogRecord) -> int:
    number = readable.log_record.severity_number
    return number._value_ if number is not None else 0  # _value_: a plain read, unlike .value


def encode_log(readable: ReadableLogRecord, resource_id: int, max_size: int) -> tuple[bytes, bool]:
    """The record payload of a log record, and whether it had to be cut to fit.

    Raises anyvalue.UnsupportedValue if the body cannot be encoded (the caller counts
    the record as dropped).
    """
    record = readable.log_record
    attributes, bad_attributes = encode_attributes(record.attributes)
    texts = [
        encode_plain(record.severity_text or ""),
        encode_plain(record.event_name or ""),
        anyvalue.encode(record.body, "body").encode(),
        attributes,
        encode_scope(readable.instrumentation_scope),
    ]
    dropped = readable.dropped_attributes + bad_attributes
    truncated = 0
    if LOG.size(texts) > max_size:
        truncated, dropped = _fit(texts, dropped, max_size)
    flags = (
        (FLAG_SEVERITY_TEXT if record.severity_text is not None else 0)
        | (FLAG_EVENT_NAME if record.event_name is not None else 0)
        | (FLAG_BODY if record.body is not None else 0)
    )
    fixed = (
        record.timestamp or 0,
        record.observed_timestamp or 0,
        resource_id,
        b"%032x" % (record.trace_id or 0),
        b"%016x" % (record.span_id or 0),
        dropped,
        severity_number(readable),
        int(record.trace_flags or 0),
        flags,
        truncated,
    )
    return LOG.pack(fixed, texts), bool(truncated)


def _fit(texts: list[bytes], dropped: int, max_size: int) -> tuple[int, int]:
    truncated = 0

    def over() -> int:
        return LOG.size(texts) - max_size

    for slot in (_SEVERITY_TEXT, _EVENT_NAME, _SCOPE):  # a huge one must not push out the rest
        if over() > 0 and len(texts[slot]) > max_size // 8:
            texts[slot] = cut_text(texts[slot], max_size // 8)
            truncated |= TRUNCATED_TEXT
    if over() > 0 and texts[_ATTRIBUTES] != b"{}":
        texts[_ATTRIBUTES], left_out = drop_largest(texts[_ATTRIBUTES], over())
        dropped += left_out
        truncated |= TRUNCATED_ATTRIBUTES if left_out else 0
    if over() > 0:  # the body becomes a readable string prefix ending with the marker
        body = texts[_BODY]
        target = max(len(body) - over(), 0)
        while True:  # escapes may grow the re-encoded prefix
            texts[_BODY] = anyvalue.encode(cut_text(body, target).decode()).encode()
            if over() <= 0 or target == 0:
                break
            target = max(target - max(over(), 1), 0)
        truncated |= TRUNCATED_TEXT
    for slot in (_SEVERITY_TEXT, _EVENT_NAME, _SCOPE):
        if over() > 0:
            texts[slot] = cut_text(texts[slot], len(texts[slot]) - over())
            truncated |= TRUNCATED_TEXT
    return truncated, dropped
