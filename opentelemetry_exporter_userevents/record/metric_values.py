# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""How metric numbers travel, defined once for the writer and the reader (docs/schema.md,
"Metric values").

user_events has no floating-point field types, so a double travels as the u64 of its
IEEE-754 bits: exact for every double, NaN payloads and -0.0 included. An integer that fits
s64 travels as itself. Inside JSON texts (bucket bounds, exemplar values) numbers use the
value encoding, whose float form is exact too (``repr``; ``{"~f": "NaN"}`` for non-finite).
"""

from __future__ import annotations

import struct

from opentelemetry_exporter_userevents.abi.binary import S64_MAX, S64_MIN, U64

_DOUBLE = struct.Struct("<d")
_S64 = struct.Struct("<q")

# JSON keys of the ``buckets`` and ``exemplars`` texts
BOUNDS = "bounds"
COUNTS = "counts"
SCALE = "scale"
ZERO_COUNT = "zero_count"
POSITIVE = "positive"
NEGATIVE = "negative"
OFFSET = "offset"
FLAGS = "flags"
TIME_NS = "time_ns"
VALUE = "value"
ATTRIBUTES = "attributes"
TRACE_ID = "trace_id"
SPAN_ID = "span_id"

# ``kind`` field values; ``temporality`` is AggregationTemporality's value (0 for gauges)
KIND_SUM = 1
KIND_GAUGE = 2
KIND_HISTOGRAM = 3
KIND_EXP_HISTOGRAM = 4


def double_bits(value: float) -> int:
    """The IEEE-754 bits of ``value`` (any float, or an int a double can hold approximately)."""
    return int(U64.unpack(_DOUBLE.pack(value))[0])


def bits_double(bits: int) -> float:
    return float(_DOUBLE.unpack(U64.pack(bits))[0])


def s64_bits(value: int) -> int:
    """An s64 as the u64 of its two's complement."""
    return int(U64.unpack(_S64.pack(value))[0])


def bits_s64(bits: int) -> int:
    return int(_S64.unpack(U64.pack(bits))[0])


def fits_s64(value: int) -> bool:
    return S64_MIN <= value <= S64_MAX


def filter_value(value: float) -> int:
    """A double as an s64 for kernel filters: cut toward zero and clamped; 0 for NaN."""
    if value != value:
        return 0
    if value >= S64_MAX:
        return S64_MAX
    if value <= S64_MIN:
        return S64_MIN
    return int(value)
