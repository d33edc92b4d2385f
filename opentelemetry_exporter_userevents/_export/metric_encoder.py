# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The metric encoder: one data point as one ``otel_metric_<kind>`` record (the
METRIC_NUMBER and METRIC_HISTOGRAM schemas).

Numbers travel as record.metric_values says: integers in s64 as themselves, doubles as their
IEEE-754 bits, so the reader gets back exactly the value the SDK had. A point too large is
cut to fit (_export.fit): long texts capped, exemplars left out from the end, a histogram's
buckets merged pairwise (explicit: every other bound kept; exponential: downscaled; counts,
sum, min and max unchanged), attributes left out largest first, then texts cut.
Buckets are merged to half the record before any attribute is left out (attributes say
which series a point belongs to). Everything left out is counted in the record and marked
in its ``truncated`` bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    ExponentialHistogramDataPoint,
    HistogramDataPoint,
    NumberDataPoint,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents._export.attributes import encode_attributes, encode_scope
from opentelemetry_exporter_userevents._export.fit import RecordFitter
from opentelemetry_exporter_userevents._export.redaction import Redactor, redact_attributes
from opentelemetry_exporter_userevents.abi.binary import S64_MAX, S64_MIN
from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.flags import (
    METRIC_MAX_INT,
    METRIC_MIN_INT,
    METRIC_SUM_INT,
    METRIC_VALUE_BIG,
    METRIC_VALUE_INT,
    TRUNCATED_BUCKETS,
    TRUNCATED_EXEMPLARS,
)
from opentelemetry_exporter_userevents.record.plain_text import encode_plain
from opentelemetry_exporter_userevents.record.schema import METRIC_HISTOGRAM, METRIC_NUMBER

Point = NumberDataPoint | HistogramDataPoint | ExponentialHistogramDataPoint


class PointItem(NamedTuple):
    """One data point with what its record needs from the metric around it."""

    resource: Resource
    scope: InstrumentationScope | None
    name: str
    description: str | None
    unit: str | None
    point: Point
    kind: int
    """record.metric_values KIND_*."""
    temporality: int
    """AggregationTemporality value; 0 for gauges."""
    monotonic: bool


# text slots of METRIC_NUMBER and METRIC_HISTOGRAM
_N_NAME, _N_ATTRIBUTES, _N_EXEMPLARS, _N_VALUE_TEXT, _N_SCOPE, _N_DESCRIPTION, _N_UNIT = range(7)
_H_NAME, _H_ATTRIBUTES, _H_BUCKETS, _H_EXEMPLARS, _H_SCOPE, _H_DESCRIPTION, _H_UNIT = range(7)
_N_CUTTABLE = (_N_DESCRIPTION, _N_SCOPE, _N_UNIT, _N_NAME)
_H_CUTTABLE = (_H_DESCRIPTION, _H_SCOPE, _H_UNIT, _H_NAME)


def temporality_value(temporality: AggregationTemporality | None) -> int:
    return int(temporality.value) if temporality is not None else 0


def _as_double(value: float) -> float:
    """``value`` as a double; an integer beyond the double range becomes +-inf."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _exemplars(point: Point) -> tuple[list[bytes], int]:
    """Each exemplar as JSON text, and how many could not be encoded (left out)."""
    parts = []
    bad = 0
    for exemplar in point.exemplars:
        value: dict[str, Any] = {
            mv.TIME_NS: exemplar.time_unix_nano,
            mv.VALUE: exemplar.value,
            mv.ATTRIBUTES: dict(exemplar.filtered_attributes or {}),
        }
        if exemplar.trace_id is not None and exemplar.span_id is not None:
            value[mv.TRACE_ID] = f"{exemplar.trace_id:032x}"
            value[mv.SPAN_ID] = f"{exemplar.span_id:016x}"
        try:
            parts.append(anyvalue.encode(value, "exemplar").encode())
        except anyvalue.UnsupportedValue:
            bad += 1
    return parts, bad


_texts: dict[tuple[str, str | None, str | None], tuple[bytes, bytes, bytes]] = {}


def _metric_texts(item: PointItem) -> tuple[bytes, bytes, bytes, bytes]:
    """Name, scope, description and unit texts (cached: a metric has many points)."""
    key = (item.name, item.description, item.unit)
    texts = _texts.get(key)
    if texts is None:
        texts = (
            encode_plain(item.name),
            encode_plain(item.description or ""),
            encode_plain(item.unit or ""),
        )
        if len(_texts) >= 1024:  # never let it grow unbounded
            _texts.clear()
        _texts[key] = texts
    return texts[0], encode_scope(item.scope), texts[1], texts[2]


def encode_point(item: PointItem, resource_id: int, max_size: int) -> tuple[bytes, bool]:
    """The record payload of one data point, and whether it had to be cut to fit.

    Raises anyvalue.UnsupportedValue for a value the encoding cannot carry (counted)."""
    if item.kind in (mv.KIND_SUM, mv.KIND_GAUGE):
        return encode_number(item, resource_id, max_size)
    return encode_histogram(item, resource_id, max_size)


def encode_number(item: PointItem, resource_id: int, max_size: int) -> tuple[bytes, bool]:
    point = item.point
    assert isinstance(point, NumberDataPoint)
    value = point.value
    value_text = b""
    if isinstance(value, int):
        flags = METRIC_VALUE_INT
        if mv.fits_s64(value):
            fixed_value = value
        else:
            flags |= METRIC_VALUE_BIG
            fixed_value = S64_MAX if value > 0 else S64_MIN
            value_text = anyvalue.encode(value).encode()
        double = _as_double(value)
    else:
        flags = 0
        double = float(value)
        fixed_value = mv.filter_value(double)
    attributes, bad_attributes = encode_attributes(point.attributes)
    exemplars, bad_exemplars = _exemplars(point)
    name, scope, description, unit = _metric_texts(item)
    texts = [
        name,
        attributes,
        b"[" + b",".join(exemplars) + b"]",
        value_text,
        scope,
        description,
        unit,
    ]
    truncated = 0
    if METRIC_NUMBER.size(texts) > max_size:
        fitter = RecordFitter(METRIC_NUMBER, texts, max_size)
        fitter.cap_texts(_N_CUTTABLE)
        bad_exemplars += fitter.drop_items(_N_EXEMPLARS, exemplars, TRUNCATED_EXEMPLARS)
        bad_attributes += fitter.drop_attributes(_N_ATTRIBUTES, point.attributes)
        fitter.cut_texts(_N_CUTTABLE)
        truncated = fitter.truncated
    fixed = (
        point.start_time_unix_nano or 0,
        point.time_unix_nano or 0,
        resource_id,
        fixed_value,
        mv.double_bits(double),
        bad_attributes,
        bad_exemplars,
        item.kind,
        item.temporality,
        int(item.monotonic),
        flags,
        truncated,
    )
    return METRIC_NUMBER.pack(fixed, texts), bool(truncated)


def _number_bits(value: float, int_flag: int) -> tuple[int, int]:
    """(bits, flag): an integer in s64 as itself, anything else as a double's bits."""
    if isinstance(value, int) and mv.fits_s64(value):
        return mv.s64_bits(value), int_flag
    return mv.double_bits(_as_double(value)), 0


_PLAIN_INT = 1 << 2048  # anyvalue writes smaller ints as decimal


def plain_numbers(values: Sequence[float]) -> str | None:
    """A JSON list of ints and finite floats, byte for byte what the value encoding writes
    for it, at a fraction of its cost (buckets are long lists of plain numbers); None if
    any value needs the general path."""
    for value in values:
        kind = type(value)
        if kind is int:
            if not -_PLAIN_INT < value < _PLAIN_INT:
                return None
        elif kind is not float or not math.isfinite(value):
            return None
    return "[" + ",".join(map(repr, values)) + "]"


def explicit_buckets(bounds: Sequence[float], counts: Sequence[int]) -> bytes:
    bounds_text, counts_text = plain_numbers(bounds), plain_numbers(counts)
    if bounds_text is not None and counts_text is not None:
        return f'{{"{mv.BOUNDS}":{bounds_text},"{mv.COUNTS}":{counts_text}}}'.encode()
    return anyvalue.encode({mv.BOUNDS: list(bounds), mv.COUNTS: list(counts)}).encode()


def exponential_buckets(point: ExponentialHistogramDataPoint, scale: int) -> bytes:
    numbers = (scale, point.zero_count, point.positive.offset, point.negative.offset)
    positive = plain_numbers(point.positive.bucket_counts)
    negative = plain_numbers(point.negative.bucket_counts)
    flags = point.flags
    if (
        positive is not None
        and negative is not None
        and plain_numbers((*numbers, flags)) is not None
    ):
        return (
            f'{{"{mv.SCALE}":{scale},"{mv.ZERO_COUNT}":{point.zero_count},'
            f'"{mv.POSITIVE}":{{"{mv.OFFSET}":{point.positive.offset},"{mv.COUNTS}":{positive}}},'
            f'"{mv.NEGATIVE}":{{"{mv.OFFSET}":{point.negative.offset},"{mv.COUNTS}":{negative}}},'
            f'"{mv.FLAGS}":{flags}}}'
        ).encode()
    return anyvalue.encode(
        {
            mv.SCALE: scale,
            mv.ZERO_COUNT: point.zero_count,
            mv.POSITIVE: {
                mv.OFFSET: point.positive.offset,
                mv.COUNTS: list(point.positive.bucket_counts),
            },
            mv.NEGATIVE: {
                mv.OFFSET: point.negative.offset,
                mv.COUNTS: list(point.negative.bucket_counts),
            },
            mv.FLAGS: point.flags,
        }
    ).encode()


def merge_explicit(bounds: list[float], counts: list[int]) -> tuple[list[float], list[int]]:
    """Half the buckets: each pair merged, every other bound kept."""
    merged = [sum(counts[i : i + 2]) for i in range(0, len(counts), 2)]
    return bounds[1::2], merged


def downscale(offset: int, counts: list[int]) -> tuple[int, list[int]]:
    """Exponential buckets at one scale lower: bucket index i becomes i >> 1."""
    if not counts:
        return offset, counts
    new_offset = offset >> 1
    merged = [0] * (((offset + len(counts) - 1) >> 1) - new_offset + 1)
    for j, count in enumerate(counts):
        merged[((offset + j) >> 1) - new_offset] += count
    return new_offset, merged


class _Buckets:
    """A histogram point's buckets being merged pairwise to fit."""

    def __init__(self, fitter: RecordFitter, point: Point) -> None:
        self.fitter = fitter
        self.point = point
        self.bounds: list[float] = []
        self.counts: list[int] = []
        self.scale = 0
        self.positive: tuple[int, list[int]] = (0, [])
        self.negative: tuple[int, list[int]] = (0, [])
        if isinstance(point, HistogramDataPoint):
            self.bounds, self.counts = list(point.explicit_bounds), list(point.bucket_counts)
        elif isinstance(point, ExponentialHistogramDataPoint):
            self.scale = point.scale
            self.positive = (point.positive.offset, list(point.positive.bucket_counts))
            self.negative = (point.negative.offset, list(point.negative.bucket_counts))

    def merge(self, limit: int) -> None:
        """Merge pairwise while the record is over its size and the buckets text is longer
        than ``limit``, or until one bucket is left."""
        fitter, point = self.fitter, self.point
        while fitter.over() > 0 and len(fitter.texts[_H_BUCKETS]) > limit:
            if isinstance(point, HistogramDataPoint):
                if not self.bounds:
                    return
                self.bounds, self.counts = merge_explicit(self.bounds, self.counts)
                text = explicit_buckets(self.bounds, self.counts)
            else:
                assert isinstance(point, ExponentialHistogramDataPoint)
                if len(self.positive[1]) <= 1 and len(self.negative[1]) <= 1:
                    return
                self.positive, self.negative = downscale(*self.positive), downscale(*self.negative)
                self.scale -= 1
                merged = replace(
                    point,
                    positive=type(point.positive)(*self.positive),
                    negative=type(point.negative)(*self.negative),
                )
                text = exponential_buckets(merged, self.scale)
            fitter.texts[_H_BUCKETS] = text
            fitter.truncated |= TRUNCATED_BUCKETS


def encode_histogram(item: PointItem, resource_id: int, max_size: int) -> tuple[bytes, bool]:
    point = item.point
    if isinstance(point, HistogramDataPoint):
        buckets = explicit_buckets(point.explicit_bounds, point.bucket_counts)
    elif isinstance(point, ExponentialHistogramDataPoint):
        buckets = exponential_buckets(point, point.scale)
    else:
        raise TypeError(f"not a histogram point: {type(point).__name__}")
    sum_bits, sum_flag = _number_bits(point.sum, METRIC_SUM_INT)
    min_bits, min_flag = _number_bits(point.min, METRIC_MIN_INT)
    max_bits, max_flag = _number_bits(point.max, METRIC_MAX_INT)
    attributes, bad_attributes = encode_attributes(point.attributes)
    exemplars, bad_exemplars = _exemplars(point)
    name, scope, description, unit = _metric_texts(item)
    texts = [
        name,
        attributes,
        buckets,
        b"[" + b",".join(exemplars) + b"]",
        scope,
        description,
        unit,
    ]
    truncated = 0
    if METRIC_HISTOGRAM.size(texts) > max_size:
        fitter = RecordFitter(METRIC_HISTOGRAM, texts, max_size)
        fitter.cap_texts(_H_CUTTABLE)
        bad_exemplars += fitter.drop_items(_H_EXEMPLARS, exemplars, TRUNCATED_EXEMPLARS)
        merging = _Buckets(fitter, point)
        merging.merge(max_size // 2)  # attributes say which series this is: keep them longer
        bad_attributes += fitter.drop_attributes(_H_ATTRIBUTES, point.attributes)
        merging.merge(0)
        fitter.cut_texts(_H_CUTTABLE)
        truncated = fitter.truncated
    fixed = (
        point.start_time_unix_nano or 0,
        point.time_unix_nano or 0,
        resource_id,
        point.count,
        sum_bits,
        min_bits,
        max_bits,
        bad_attributes,
        bad_exemplars,
        item.kind,
        item.temporality,
        sum_flag | min_flag | max_flag,
        truncated,
    )
    return METRIC_HISTOGRAM.pack(fixed, texts), bool(truncated)


def redact_point(item: PointItem, redact: Redactor) -> PointItem:
    """``item`` with its point's and exemplars' attributes redacted."""
    point = item.point
    exemplars = [
        replace(e, filtered_attributes=redact_attributes(e.filtered_attributes, redact))
        for e in point.exemplars
    ]
    redacted = replace(
        point, attributes=redact_attributes(point.attributes, redact), exemplars=exemplars
    )
    return item._replace(point=redacted)
