# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The ``hist`` file parser: the kernel's text (seen on Linux 6.12) parses to its rows,
generated tables survive a round trip, and garbage raises only ValueError."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.abi.tracefs import _last_error
from opentelemetry_exporter_userevents.reader.hist import (
    HistEntry,
    Histogram,
    Totals,
    format_hist,
    merge,
    parse_hist,
)
from opentelemetry_exporter_userevents.reader.hist_collector import TRIGGERS
from opentelemetry_exporter_userevents.reader.hist_view import render
from opentelemetry_exporter_userevents.record.tracepoints import LOG_KIND, SPAN_KIND

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

KERNEL_TEXT = """\
# event histogram
#
# trigger info: hist:keys=name,status_code:vals=hitcount,duration_ns:sort=hitcount.descending:size=2048 [active]
#

{ name: checkout                                          , status_code:          2 } hitcount:          2  duration_ns:        300
{ name: item 0                                            , status_code:          0 } hitcount:          1  duration_ns:          5
{ name: a, status_code: 9 } hitcount: 1                   , status_code:          1 } hitcount:          1  duration_ns:          7
{ name:                                                   , status_code:          0 } hitcount:          1  duration_ns:          3

Totals:
    Hits: 5
    Entries: 4
    Dropped: 0
"""  # noqa: E501 - as the kernel printed it (Linux 6.12, tests/kernel/test_hist.py)


def test_the_kernels_text_parses_to_its_rows():
    table = parse_hist(KERNEL_TEXT, {"name"})
    assert table.key_fields == ("name", "status_code")
    assert table.value_fields == ("hitcount", "duration_ns")
    assert [(e.keys, e.values) for e in table.entries] == [
        ({"name": "checkout", "status_code": 2}, {"hitcount": 2, "duration_ns": 300}),
        ({"name": "item 0", "status_code": 0}, {"hitcount": 1, "duration_ns": 5}),
        (
            {"name": "a, status_code: 9 } hitcount: 1", "status_code": 1},
            {"hitcount": 1, "duration_ns": 7},
        ),
        ({"name": "", "status_code": 0}, {"hitcount": 1, "duration_ns": 3}),
    ]
    assert table.totals == Totals(hits=5, entries=4, dropped=0)
    assert table.trigger.endswith(":size=2048")


def test_a_numeric_key_must_be_a_number_and_text_keys_are_the_callers_word():
    with pytest.raises(ValueError, match="not a number"):
        parse_hist(KERNEL_TEXT)  # name taken for a number
    with pytest.raises(ValueError, match="no histogram"):
        parse_hist("")  # an event without a hist trigger
    with pytest.raises(ValueError, match="Entries says 5"):
        parse_hist(KERNEL_TEXT.replace("Entries: 4", "Entries: 5"), {"name"})
    with pytest.raises(ValueError, match="a second histogram"):
        parse_hist(KERNEL_TEXT + KERNEL_TEXT, {"name"})


def test_tables_of_several_tracepoints_add_up_and_render():
    table = parse_hist(KERNEL_TEXT, {"name"})
    merged = merge([table, table])
    assert merged is not None
    assert merged.rows[("checkout", 2)] == {"hitcount": 4, "duration_ns": 600}
    assert (merged.hits, merged.tables) == (10, 2)
    out = io.StringIO()
    render({("otel", SPAN_KIND): merged}, out)
    lines = out.getvalue().splitlines()
    assert lines[:3] == [
        "prefix otel",
        "  spans: 10 counted in 2 tracepoints",
        "    NAME                             STATUS  COUNT  TOTAL ms  AVG ms",
    ]
    assert lines[3].split() == ["checkout", "error", "4", "0.001", "0.000"]
    assert merge([]) is None


def test_log_tables_render_severity_names_and_scope_names():
    log = TRIGGERS[LOG_KIND]
    table = Histogram(
        log.text,
        log.keys,
        ("hitcount",),
        (HistEntry({"scope": '{"name":"app.db","version":""}', "severity_number": 17},
                   {"hitcount": 3}),),
        Totals(3, 1, 0),
        log.text_keys,
    )  # fmt: skip
    parsed = parse_hist(format_hist(table), log.text_keys)
    merged = merge([parsed])
    assert merged is not None
    out = io.StringIO()
    render({("otel", LOG_KIND): merged}, out)
    assert out.getvalue().splitlines()[-1].split() == ["ERROR", "(17)", "app.db", "3"]


def test_the_kernels_reason_is_taken_from_the_error_log():
    log = (
        "[   26.655447] hist:user_events:p_x: error: Couldn't find field\n"
        "  Command: hist:keys=nosuch\n"
        "                    ^\n"
        "[   26.732560] hist:user_events:other: error: Hist trigger already exists\n"
        "  Command: hist:keys=a\n"
        "           ^\n"
    )
    assert _last_error(log, "p_x") == "Couldn't find field (at 'nosuch')"
    assert _last_error(log, "other") == "Hist trigger already exists"
    assert _last_error(log, "none") == ""


_TEXT_KEY = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=80
).map(lambda s: s.rstrip(" "))
_NUMBER = st.integers(min_value=0, max_value=2**64 - 1)


@st.composite
def _histograms(draw: st.DrawFn) -> Histogram:
    text_first = draw(st.booleans())
    names = draw(
        st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True), min_size=1,
                 max_size=3, unique=True)
    )  # fmt: skip
    value_names = draw(
        st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True), max_size=2, unique=True)
    )
    values = tuple(v for v in value_names if v not in names and v != "hitcount")
    text_keys = frozenset(names[:1]) if text_first else frozenset()
    rows = draw(
        st.lists(
            st.tuples(
                st.tuples(*(_TEXT_KEY if n in text_keys else _NUMBER for n in names)),
                st.tuples(*(_NUMBER for _ in range(1 + len(values)))),
            ),
            max_size=8,
        )
    )
    v_names = ("hitcount", *values)
    entries = tuple(
        HistEntry(dict(zip(names, keys, strict=True)), dict(zip(v_names, sums, strict=True)))
        for keys, sums in rows
    )
    vals = ",".join(("hitcount", *values))
    trigger = f"hist:keys={','.join(names)}:vals={vals}:sort=hitcount:size=2048"
    totals = Totals(draw(_NUMBER), len(entries), draw(_NUMBER))
    return Histogram(trigger, tuple(names), ("hitcount", *values), entries, totals, text_keys)


@SETTINGS
@given(_histograms())
def test_generated_tables_survive_a_round_trip(table: Histogram):
    assert parse_hist(format_hist(table), table.text_keys) == table


@SETTINGS
@given(st.one_of(st.text(max_size=2000), st.binary(max_size=2000)))
def test_any_text_or_bytes_raise_only_value_error(text: str | bytes):
    try:
        parse_hist(text, {"name"})
    except ValueError:
        pass


@SETTINGS
@given(_histograms(), st.data())
def test_a_mangled_table_raises_only_value_error(table: Histogram, data: st.DataObject):
    text = format_hist(table)
    at = data.draw(st.integers(min_value=0, max_value=len(text)))
    junk = data.draw(st.text(max_size=8))
    cut = data.draw(st.integers(min_value=0, max_value=4))
    try:
        parse_hist(text[:at] + junk + text[at + cut :], table.text_keys)
    except ValueError:
        pass
