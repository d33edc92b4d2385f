# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Metric records that no exporter wrote (forged, corrupt, or from a future version) never
crash the reader: each is rebuilt or counted invalid, and what is rebuilt can be shown and
encoded (or is counted as refused by the output)."""

from __future__ import annotations

import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.reader.decode.decoder import TraceRecord
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.outputs.output import OtlpJsonOutput, TreeOutput
from opentelemetry_exporter_userevents.record import anyvalue, tracepoints
from opentelemetry_exporter_userevents.record.schema import METRIC_HISTOGRAM, METRIC_NUMBER
from tests.support.otel_strategies import any_values

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "bounds",
                    "counts",
                    "scale",
                    "zero_count",
                    "positive",
                    "negative",
                    "offset",
                    "flags",
                    "time_ns",
                    "value",
                    "attributes",
                    "trace_id",
                    "span_id",
                    "x",
                ]
            ),
            children,
            max_size=6,
        )
    ),  # fmt: skip
    max_leaves=16,
)
texts = (
    json_values.map(lambda v: json.dumps(v))
    | any_values.map(anyvalue.encode)
    | st.text(max_size=20)
    | st.sampled_from(['{"bounds":[1.5],"counts":[1,2]}', "[]", "{}", '{"k":1}'])
)
kinds = st.sampled_from(list(tracepoints.METRIC_KINDS))
numbers = st.integers() | st.floats() | st.booleans() | st.text(max_size=2)
counts = st.lists(st.integers(-2, 2**65) | numbers, max_size=5)
# Texts shaped like each field's (a value of the wrong type here and there), or anything.
VALID = {
    "attributes": st.dictionaries(st.text(max_size=3), any_values, max_size=3).map(anyvalue.encode),
    "exemplars": st.lists(
        st.fixed_dictionaries(
            {
                "time_ns": st.integers(0, 2**64) | numbers,
                "value": numbers,
                "attributes": st.just({}) | json_values,
            },
            optional={"trace_id": st.sampled_from(["ab", "zz"]), "span_id": st.just("01")},
        ),
        max_size=2,
    ).map(anyvalue.encode),  # fmt: skip
    "buckets": st.fixed_dictionaries(
        {"bounds": st.lists(numbers, max_size=4), "counts": counts}
    ).map(anyvalue.encode)
    | st.fixed_dictionaries(
        {
            "scale": st.integers(-20, 20) | numbers,
            "zero_count": st.integers(0, 9),
            "positive": st.fixed_dictionaries({"offset": st.integers(), "counts": counts}),
            "negative": st.fixed_dictionaries({"offset": st.integers(-5, 5), "counts": counts}),
            "flags": st.integers(0, 1),
        }
    ).map(anyvalue.encode),  # fmt: skip
    "scope": st.sampled_from(["{}", '{"name":"s","version":"1"}']),
    "value_text": st.integers().map(anyvalue.encode) | numbers.map(anyvalue.encode),
}


@st.composite
def metric_records(draw: st.DrawFn) -> TraceRecord:
    kind = draw(kinds)
    schema = tracepoints.METRIC_KINDS[kind]
    values = {}
    plain = ("name", "description", "unit")
    for field in schema.fields:
        if field.name in plain:
            values[field.name] = draw(st.text(max_size=5))
            continue
        if field.is_text:
            valid = VALID.get(field.name)
            garbage = valid is None or draw(st.integers(0, 9)) == 0
            values[field.name] = draw(texts if garbage else valid)
        elif field.type == "s64":
            values[field.name] = draw(st.integers(-(2**63), 2**63 - 1))
        else:
            bits = {"u8": 8, "u16": 16, "u32": 32, "u64": 64}[field.type]
            values[field.name] = draw(st.integers(0, 6) | st.integers(0, 2**bits - 1))
    values["resource_id"] = 1
    return TraceRecord(0, kind, "otel_" + kind, 1, values)


@settings(max_examples=600, deadline=None)
@given(records=st.lists(metric_records(), min_size=1, max_size=5))
def test_forged_metric_records_are_rebuilt_or_counted_never_raised(records):
    assert {METRIC_NUMBER, METRIC_HISTOGRAM} == set(tracepoints.METRIC_KINDS.values())
    join_stage = JoinStage(resource_wait=0)
    points = join_stage.add(records) + join_stage.flush()
    assert len(points) + join_stage.stats.invalid == len(records)
    tree = TreeOutput(io.StringIO())
    tree.write(points)
    assert tree.view.out.getvalue().count("\n") == len(points)
    otlp = OtlpJsonOutput(io.StringIO())
    otlp.write(points)
    lines = otlp.out.getvalue().splitlines()
    assert otlp.failed <= len(points) and len(lines) == (1 if otlp.failed < len(points) else 0)
