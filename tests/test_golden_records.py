# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Byte-identical records across refactors and speed work: a seeded corpus of spans and logs,
most of them too large for their record (every step of fitting is taken), encoded at three
record sizes, must hash to the digest pinned here. The digest was taken from the encoders
before the layout refactor; any change in any byte of any record changes it. A deliberate
change to the record format changes the schema version too, and updates this digest."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, TraceFlags

from opentelemetry_exporter_userevents._export.log_encoder import encode_log
from opentelemetry_exporter_userevents._export.span_encoder import encode_span

DIGEST = "0922e2077bfbdce106b963fdb95d521a2a9ec41192ef4666cd6f22b35fb3fc32"
SIZES = (1024, 2048, 4064)


def _value(r: random.Random, depth: int = 0) -> Any:
    choice = r.randrange(9 if depth < 3 else 6)
    if choice == 0:
        return "x" * r.randrange(0, 400) + chr(r.randrange(32, 0x3000))
    if choice == 1:
        return r.randrange(-(2**70), 2**70)
    if choice == 2:
        return r.random() * 1e10
    if choice == 3:
        return bool(r.randrange(2))
    if choice == 4:
        return bytes(r.randrange(256) for _ in range(r.randrange(50)))
    if choice == 5:
        return None if depth else "n"
    if choice == 6:
        return [_value(r, depth + 1) for _ in range(r.randrange(5))]
    if choice == 7:
        return {f"k{i}\u2028~": _value(r, depth + 1) for i in range(r.randrange(4))}
    return "\ud800" + "é" * r.randrange(100)


def corpus() -> list[tuple[str, int, bytes, bool]]:
    """(kind, max size, payload, truncated) for 600 spans and 600 logs, at each size."""
    r = random.Random(99)
    out = []
    for _ in range(600):
        attributes = {
            ("~" if r.random() < 0.1 else "") + f"a{j}": _value(r) for j in range(r.randrange(60))
        }
        context = SpanContext(r.randrange(1, 2**128), r.randrange(1, 2**64), False, TraceFlags(1))
        events = [
            Event(
                "e" * r.randrange(1, 300),
                {f"ek{j}": _value(r) for j in range(r.randrange(5))},
                r.randrange(2**62),
            )
            for _ in range(r.randrange(0, 40))
        ]
        links = [
            Link(
                SpanContext(r.randrange(1, 2**128), r.randrange(1, 2**64), True, TraceFlags(0)),
                {f"lk{j}": _value(r) for j in range(r.randrange(4))},
            )
            for _ in range(r.randrange(0, 20))
        ]
        scope = InstrumentationScope("s" * r.randrange(1, 900), "1.0", None, {"sa": _value(r)})
        span = ReadableSpan(
            name="n" * r.randrange(1, 3000),
            context=context,
            parent=None,
            resource=Resource({}),
            attributes=attributes,
            events=events,
            links=links,
            start_time=1,
            end_time=5,
            instrumentation_scope=scope,
        )
        for size in SIZES:
            out.append(("span", size, *encode_span(span, 5, size)))
        body = _value(r) if r.random() < 0.5 else "b" * r.randrange(5000)
        record = LogRecord(
            timestamp=5,
            observed_timestamp=6,
            severity_text="W" * r.randrange(0, 2000),
            severity_number=SeverityNumber(r.randrange(1, 25)),
            body=body,
            attributes=attributes,
            event_name="ev" * r.randrange(0, 500),
        )
        readable = ReadableLogRecord(record, Resource({}), scope)
        for size in SIZES:
            out.append(("log", size, *encode_log(readable, 5, size)))
    return out


def test_seeded_corpus_encodes_to_the_pinned_bytes() -> None:
    records = corpus()
    digest = hashlib.sha256()
    for kind, size, payload, truncated in records:
        digest.update(repr((kind, size)).encode())
        digest.update(payload)
        digest.update(b"T" if truncated else b"F")
    assert all(len(payload) <= size for _, size, payload, _ in records)
    assert sum(truncated for *_, truncated in records) > 3000  # fitting is exercised
    assert digest.hexdigest() == DIGEST
