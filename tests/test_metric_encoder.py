# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The metric encoder and its rebuild on the host: every value comes back exactly (ints as
ints, doubles bit for bit, NaN, ±Inf, -0.0 and huge integers included), and oversized
points are cut to fit with marks and counts, never silently."""

from __future__ import annotations

import math
import struct
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import Exemplar
from opentelemetry.sdk.metrics.export import (
    Buckets,
    ExponentialHistogramDataPoint,
    HistogramDataPoint,
    NumberDataPoint,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents._export.metric_encoder import (
    PointItem,
    downscale,
    encode_point,
    explicit_buckets,
    exponential_buckets,
    merge_explicit,
)
from opentelemetry_exporter_userevents.abi.binary import S64_MAX, S64_MIN
from opentelemetry_exporter_userevents.reader.decode.validation import RecordChecker
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint, rebuild_point
from opentelemetry_exporter_userevents.record import anyvalue, flags
from opentelemetry_exporter_userevents.record import metric_values as mv
from opentelemetry_exporter_userevents.record.schema import METRIC_HISTOGRAM, METRIC_NUMBER
from tests.support.otel_strategies import attributes, scopes, texts
from tests.support.records import HEADER, fields_the_kernel_accepts
from tests.support.records import format_of as unsigned_format_of

RESOURCE = Resource({"service.name": "m"})
doubles = st.floats() | st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7e308])
integers = st.integers() | st.sampled_from([S64_MAX, S64_MIN, 2**63, -(2**63) - 1, 2**2048])
numbers = doubles | integers
finite_int_or_double = st.integers(S64_MIN, S64_MAX) | doubles
exemplar_attributes = st.dictionaries(texts, st.integers() | st.text() | st.floats(), max_size=3)
exemplars = st.lists(
    st.builds(
        Exemplar,
        exemplar_attributes,
        numbers,
        st.integers(0, 2**64 - 1),
        st.none() | st.integers(1, 2**64 - 1),
        st.none() | st.integers(1, 2**128 - 1),
    ),
    max_size=3,
)


def format_of(schema, name):
    """The format file the kernel shows: as tests.support.records has it, with s64 fields
    marked signed (the kernel writes ``signed:1`` for them)."""
    fmt = unsigned_format_of(schema, name)
    fields = tuple(replace(f, signed=f.type == "s64") for f in fmt.fields)
    return replace(fmt, fields=fields)


def roundtrip(item: PointItem, max_size: int = 4064) -> MetricPoint:
    payload, _ = encode_point(item, 42, max_size)
    assert len(payload) <= max_size
    schema = METRIC_NUMBER if item.kind in (mv.KIND_SUM, mv.KIND_GAUGE) else METRIC_HISTOGRAM
    fields_the_kernel_accepts(payload, schema)
    values = schema.unpack(HEADER + payload, format_of(schema, "otel_metric_x.0"))
    assert values["resource_id"] == 42
    return rebuild_point(RecordChecker().metric(values, None), RESOURCE, item.scope)


def exactly(a: object, b: object, in_json: bool = False) -> bool:
    """Equal, with the same type, doubles bit for bit (NaN and -0.0 included); ``in_json``:
    a double in a JSON text, where a NaN is a NaN (the value encoding keeps no NaN sign or
    payload, as JSON and OTLP/JSON keep none), and -0.0 and every other double are exact."""
    if isinstance(a, float) and isinstance(b, float):
        if in_json and math.isnan(a) and math.isnan(b):
            return True
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        pairs = zip(a, b, strict=False)
        return len(a) == len(b) and all(exactly(x, y, in_json) for x, y in pairs)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(exactly(a[k], b[k], in_json) for k in a)
    return type(a) is type(b) and a == b


def item(point, kind: int, scope=None, name="m", temporality=2, monotonic=False) -> PointItem:
    return PointItem(RESOURCE, scope, name, "d", "ms", point, kind, temporality, monotonic)


@settings(max_examples=300, deadline=None)
@given(
    value=numbers,
    attrs=attributes,
    exemplar_list=exemplars,
    scope=scopes,
    name=texts,
    kind=st.sampled_from([mv.KIND_SUM, mv.KIND_GAUGE]),
    monotonic=st.booleans(),
)
def test_number_points_come_back_exactly(value, attrs, exemplar_list, scope, name, kind, monotonic):
    point = NumberDataPoint(attrs, 1, 2**64 - 1, value, exemplar_list)
    got = roundtrip(item(point, kind, scope, name, 1, monotonic), max_size=8184)
    if got.truncated:  # a few generated attributes are too large for one record
        return
    assert exactly(got.point.value, value)
    assert got.point.start_time_unix_nano == 1 and got.point.time_unix_nano == 2**64 - 1
    assert exactly(dict(got.point.attributes), _sdk(dict(attrs)), True) or got.dropped_attributes
    assert len(got.point.exemplars) + got.dropped_exemplars == len(exemplar_list)
    for mine, theirs in zip(got.point.exemplars, exemplar_list, strict=False):
        assert exactly(mine.value, theirs.value, True)
        assert mine.time_unix_nano == theirs.time_unix_nano
        if theirs.trace_id is not None and theirs.span_id is not None:
            assert (mine.trace_id, mine.span_id) == (theirs.trace_id, theirs.span_id)
    assert (got.name, got.kind, got.monotonic) == (name, kind, monotonic)
    assert got.temporality is not None and got.temporality.value == 1


def _sdk(value):
    if isinstance(value, list):
        return tuple(_sdk(v) for v in value)
    if isinstance(value, dict):
        return {k: _sdk(v) for k, v in value.items()}
    return value


@settings(max_examples=200, deadline=None)
@given(
    counts=st.lists(st.integers(0, 2**58), min_size=1, max_size=40),
    bound_values=st.lists(doubles | st.integers(-(2**53), 2**53), max_size=40),
    total=finite_int_or_double | integers,
    low=finite_int_or_double,
    high=finite_int_or_double,
)
def test_histogram_points_come_back_exactly(counts, bound_values, total, low, high):
    bounds = bound_values[: len(counts) - 1]
    counts = counts[: len(bounds) + 1]
    point = HistogramDataPoint({"a": 1}, 5, 6, sum(counts), total, counts, bounds, low, high)
    got = roundtrip(item(point, mv.KIND_HISTOGRAM)).point
    assert isinstance(got, HistogramDataPoint)
    assert exactly(list(got.bucket_counts), counts)
    assert exactly(list(got.explicit_bounds), bounds, True)
    assert got.count == sum(counts)
    for mine, theirs in ((got.sum, total), (got.min, low), (got.max, high)):
        if isinstance(theirs, int) and not mv.fits_s64(theirs):
            try:  # as OTLP's double carries it
                assert mine == float(theirs)
            except OverflowError:
                assert mine == (math.inf if theirs > 0 else -math.inf)
        else:
            assert exactly(mine, theirs)


buckets = st.builds(
    Buckets, st.integers(-(2**31), 2**31), st.lists(st.integers(0, 2**40), max_size=30)
)


@settings(max_examples=200, deadline=None)
@given(
    positive=buckets,
    negative=buckets,
    scale=st.integers(-10, 20),
    zero=st.integers(0, 2**40),
    total=doubles,
    point_flags=st.integers(0, 1),
)
def test_exponential_histogram_points_come_back_exactly(
    positive, negative, scale, zero, total, point_flags
):
    count = zero + sum(positive.bucket_counts) + sum(negative.bucket_counts)
    point = ExponentialHistogramDataPoint(
        {}, 1, 2, count, total, scale, zero, positive, negative, point_flags, 0.5, 9.0
    )
    got = roundtrip(item(point, mv.KIND_EXP_HISTOGRAM, temporality=1)).point
    assert got == point or exactly(got.sum, total)
    assert (got.scale, got.zero_count, got.flags, got.count) == (scale, zero, point_flags, count)
    assert got.positive.offset == positive.offset and got.negative.offset == negative.offset
    assert list(got.positive.bucket_counts) == list(positive.bucket_counts)
    assert list(got.negative.bucket_counts) == list(negative.bucket_counts)


@given(bounds=st.lists(st.floats(allow_nan=False), max_size=50), seed=st.randoms())
def test_merging_explicit_buckets_keeps_every_count_in_a_wider_bucket(bounds, seed):
    bounds = sorted(set(bounds))
    counts = [seed.randrange(100) for _ in range(len(bounds) + 1)]
    merged_bounds, merged = merge_explicit(bounds, counts)
    assert len(merged) == len(merged_bounds) + 1 and sum(merged) == sum(counts)
    # bucket i of the merged histogram is buckets 2i and 2i+1 of the original
    assert merged == [sum(counts[2 * i : 2 * i + 2]) for i in range(len(merged))]
    assert set(merged_bounds) <= set(bounds)


@given(offset=st.integers(-1000, 1000), counts=st.lists(st.integers(0, 100), max_size=50))
def test_downscaling_maps_each_bucket_to_its_parent(offset, counts):
    new_offset, merged = downscale(offset, counts)
    assert sum(merged) == sum(counts)
    for j, count in enumerate(counts):  # index i at scale s lies in index i >> 1 at s - 1
        assert merged[((offset + j) >> 1) - new_offset] >= count
    if counts:
        assert new_offset == offset >> 1 and len(merged) <= len(counts) // 2 + 1


def test_a_histogram_of_many_buckets_is_merged_to_fit_and_marked():
    bounds = [float(i) for i in range(5000)]
    counts = [1] * 5001
    many = {f"key{i}": "x" * 40 for i in range(100)}
    point = HistogramDataPoint(many, 1, 2, 5001, 12.5, counts, bounds, 0.0, 5000.0)
    got = roundtrip(item(point, mv.KIND_HISTOGRAM))
    assert got.truncated & flags.TRUNCATED_BUCKETS
    assert sum(got.point.bucket_counts) == 5001 == got.point.count
    assert len(got.point.bucket_counts) < 5001 and set(got.point.explicit_bounds) <= set(bounds)
    assert (got.point.sum, got.point.min, got.point.max) == (12.5, 0.0, 5000.0)
    # buckets are merged before attributes go: some attributes are kept, the rest counted
    assert got.point.attributes and got.dropped_attributes + len(got.point.attributes) == 100
    assert got.truncated & flags.TRUNCATED_ATTRIBUTES


def test_an_exponential_histogram_of_many_buckets_is_downscaled_to_fit():
    positive = Buckets(-3000, [1] * 6000)
    point = ExponentialHistogramDataPoint(
        {}, 1, 2, 6000, 1.0, 20, 0, positive, Buckets(0, []), 0, 0.1, 10.0
    )
    got = roundtrip(item(point, mv.KIND_EXP_HISTOGRAM)).point
    assert got.scale < 20 and sum(got.positive.bucket_counts) == 6000
    expected_offset, expected = -3000, [1] * 6000
    for _ in range(20 - got.scale):
        expected_offset, expected = downscale(expected_offset, expected)
    assert (got.positive.offset, list(got.positive.bucket_counts)) == (expected_offset, expected)


def test_exemplars_go_first_then_attributes_each_counted():
    many_exemplars = [Exemplar({"k": "v" * 100}, 1.5, 7, 1, 2) for _ in range(100)]
    many = {f"key{i}": "y" * 100 for i in range(60)}
    point = NumberDataPoint(many, 1, 2, 3, many_exemplars)
    got = roundtrip(item(point, mv.KIND_SUM))
    assert got.truncated & flags.TRUNCATED_EXEMPLARS
    assert got.dropped_exemplars + len(got.point.exemplars) == 100
    assert got.dropped_attributes + len(got.point.attributes) == 60
    assert got.point.value == 3


def test_a_long_description_and_scope_are_cut_with_the_marker():
    scope = InstrumentationScope("s" * 5000, "1")
    point = NumberDataPoint({}, 1, 2, 2.5)
    long_item = PointItem(RESOURCE, scope, "n", "d" * 5000, "u", point, mv.KIND_GAUGE, 0, False)
    payload, truncated = encode_point(long_item, 1, 4064)
    assert truncated and len(payload) <= 4064
    values = METRIC_NUMBER.unpack(HEADER + payload, format_of(METRIC_NUMBER, "x.0"))
    assert values["description"].endswith(flags.TRUNCATION_MARK)
    assert values["truncated"] & flags.TRUNCATED_TEXT and values["name"] == "n"


@given(
    bounds=st.lists(doubles | integers, max_size=20),
    counts=st.lists(st.integers(0, 2**64), max_size=20),
    point_flags=st.integers(0, 1),
    scale=st.integers(-10, 20),
)
def test_the_buckets_fast_path_writes_what_the_value_encoding_writes(
    bounds, counts, point_flags, scale
):
    fast = explicit_buckets(bounds, counts)
    assert fast == anyvalue.encode({"bounds": bounds, "counts": counts}).encode()
    point = ExponentialHistogramDataPoint(
        {}, 1, 2, 0, 0, scale, 3, Buckets(-5, counts), Buckets(7, counts[:2]), point_flags, 0, 0
    )
    general = {
        "scale": scale,
        "zero_count": 3,
        "positive": {"offset": -5, "counts": counts},
        "negative": {"offset": 7, "counts": counts[:2]},
        "flags": point_flags,
    }
    assert exponential_buckets(point, scale) == anyvalue.encode(general).encode()
