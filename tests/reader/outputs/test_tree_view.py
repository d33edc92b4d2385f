# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The tree view prints every span exactly once and never raises, whatever the parent
links a writer chose: spans that are their own parent, parent cycles, parents never seen,
span ids seen twice, chains of any depth; and it holds a bounded number of spans waiting for
a root that never comes."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from opentelemetry_exporter_userevents.reader.outputs.exporters import tree_view
from opentelemetry_exporter_userevents.reader.outputs.exporters.tree_view import MAX_DEPTH, TreeView

TRACE = 0x0AF7651916CD43DD8448EB211C80319C
_NAME = re.compile(r"span-(\d+)-  ")


def _span(number: int, span_id: int, parent: int | None, remote: bool = False,
          trace_id: int = TRACE) -> ReadableSpan:  # fmt: skip
    return ReadableSpan(
        name=f"span-{number}-",
        context=SpanContext(trace_id, span_id, is_remote=False),
        parent=None if parent is None else SpanContext(trace_id, parent, is_remote=remote),
        start_time=1_000 + number,
        end_time=2_000 + number,
    )


def _printed(out: io.StringIO) -> list[int]:
    return [int(m[1]) for m in _NAME.finditer(out.getvalue())]


def _show(spans: list[ReadableSpan]) -> io.StringIO:
    out = io.StringIO()
    view = TreeView(out)
    view.add(spans)
    view.flush()
    return out


def test_a_span_that_is_its_own_parent_is_printed_as_a_marked_root():
    out = _show([_span(0, 5, 5), _span(1, 6, 5)])
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("  span-0-  internal") and lines[1].endswith("(own parent)")
    assert lines[2].startswith("  └─ span-1-  internal")
    assert sorted(_printed(out)) == [0, 1]


def test_spans_that_are_each_others_parent_are_printed_once_with_the_cycle_marked():
    out = _show([_span(0, 1, 2), _span(1, 2, 3), _span(2, 3, 1), _span(3, 4, 3)])
    text = out.getvalue()
    assert sorted(_printed(out)) == [0, 1, 2, 3]
    assert text.count("(parent cycle: parent ") == 1
    assert len(text.splitlines()) == 5  # the trace line and 4 spans


def test_a_chain_of_ten_thousand_spans_prints_in_bounded_width_without_recursion():
    count = 10_000
    chain = [_span(n, n + 1, n if n else None) for n in range(count)]
    out = io.StringIO()
    view = TreeView(out)
    view.add(reversed(chain))  # children end, and arrive, first: the root comes last
    lines = out.getvalue().splitlines()
    assert len(lines) == count + 1
    assert _printed(out) == list(range(count))  # depth first: in chain order
    assert max(len(line) for line in lines) < 3 * MAX_DEPTH + 120
    assert lines[-1].endswith(f"(depth {count - 1})")
    assert "(depth" not in lines[MAX_DEPTH + 1]  # indented up to MAX_DEPTH, marked below


def test_spans_waiting_for_a_root_are_bounded_the_oldest_trace_printed_first(monkeypatch):
    monkeypatch.setattr(tree_view, "MAX_WAITING_SPANS", 10)
    out = io.StringIO()
    view = TreeView(out)
    for number in range(25):  # 25 traces whose root never comes
        view.add([_span(number, 1, 99, trace_id=number + 1)])
        assert view._waiting <= 10
    assert view.printed_early == 15
    assert _printed(out) == list(range(15))
    assert out.getvalue().count("(printed before its root: too many spans waiting)") == 15
    view.flush()
    assert _printed(out) == list(range(25))
    monkeypatch.setattr(tree_view, "MAX_WAITING_SPANS", 100_000)
    monkeypatch.setattr(tree_view, "MAX_WAITING_TRACES", 3)
    view = TreeView(io.StringIO())
    view.add(_span(n, 1, 99, trace_id=n + 1) for n in range(10))
    assert len(view._traces) == 3 and view.printed_early == 7


@st.composite
def _graphs(draw: st.DrawFn) -> list[ReadableSpan]:
    """Spans with ids from a small range (so some repeat), each with no parent, a remote
    one, itself, or any id of the range (seen or not), in one or two traces."""
    count = draw(st.integers(min_value=1, max_value=30))
    ids = st.integers(min_value=1, max_value=12)
    spans = []
    for number in range(count):
        span_id = draw(ids)
        parent = draw(st.one_of(st.none(), st.just(span_id), ids))
        remote = parent is not None and draw(st.integers(0, 9)) == 0
        trace_id = TRACE + draw(st.integers(0, 1))
        spans.append(_span(number, span_id, parent, remote, trace_id))
    return draw(st.permutations(spans))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(_graphs(), st.sampled_from([100_000, 1, 3]), st.integers(min_value=1, max_value=5))
def test_any_parent_graph_prints_each_span_once_and_never_raises(
    spans: list[ReadableSpan], waiting: int, batch: int
):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tree_view, "MAX_WAITING_SPANS", waiting)
        out = io.StringIO()
        view = TreeView(out)
        for start in range(0, len(spans), batch):
            view.add(spans[start : start + batch])
            assert view._waiting <= waiting
        view.flush()
    assert sorted(_printed(out)) == list(range(len(spans)))
    assert view._waiting == 0 and not view._traces


@pytest.mark.parametrize(
    ("attributes", "header"),
    [
        ({"service.name": "checkout"}, "checkout"),
        ({"service.name": "checkout", "container.id": "d548c5b83fa6" + "0" * 52},
         "checkout [d548c5b83fa6]"),
        # an app names its own container.id (the app's value wins): escaped like any text
        ({"service.name": "checkout", "container.id": "\x1b[2Jx"}, "checkout [\\x1b[2Jx]"),
        ({"service.name": "checkout", "container.id": 7}, "checkout"),
    ],
)  # fmt: skip
def test_a_trace_header_names_its_container(attributes, header):
    span = ReadableSpan(
        name="job",
        context=SpanContext(TRACE, 1, is_remote=False),
        resource=Resource(attributes),
        start_time=1,
        end_time=2,
    )

    first = _show([span]).getvalue().splitlines()[0]

    assert first == f"trace {TRACE:032x}  {header}"
