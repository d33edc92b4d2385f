# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The ``hist`` file parser: the kernel's text (seen on Linux 6.12) parses to its rows,
generated tables survive a round trip, garbage raises only ValueError, and whatever a
writer puts in a name (line breaks, terminal escapes, a row's ending, a ``Totals``
section) costs at most its own row: the other rows are read, what could not be is
counted, and the rendering escapes the names."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.abi.tracefs import _last_error
from opentelemetry_exporter_userevents.reader.hist.collector import TRIGGERS
from opentelemetry_exporter_userevents.reader.hist.hist_file import (
    _ROW_END,
    HistEntry,
    Histogram,
    Totals,
    parse_hist,
)
from opentelemetry_exporter_userevents.reader.hist.view import render
from opentelemetry_exporter_userevents.record.tracepoints import LOG_KIND, SPAN_KIND
from tests.support.hist_tables import format_hist, merge

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
    table = parse_hist(KERNEL_TEXT)  # name taken for a number: no row reads
    assert (table.entries, table.skipped, table.surplus) == ((), 4, 0)
    with pytest.raises(ValueError, match="no histogram"):
        parse_hist("")  # an event without a hist trigger
    with pytest.raises(ValueError, match="Entries says 5"):  # a name never hides a row
        parse_hist(KERNEL_TEXT.replace("Entries: 4", "Entries: 5"), {"name"})
    with pytest.raises(ValueError, match="a second histogram"):
        lines = KERNEL_TEXT.split("\n")
        parse_hist("\n".join(lines[:3] + lines[2:]), {"name"})  # in the head
    with pytest.raises(ValueError, match="no Totals"):
        parse_hist(KERNEL_TEXT.rsplit("Totals:", 1)[0], {"name"})


def _with_rows(*rows: str, entries: int) -> str:
    """KERNEL_TEXT with ``rows`` (as printed) after its own, and the kernel's count."""
    head, totals = KERNEL_TEXT.split("\n\nTotals:")
    totals = totals.replace("Entries: 4", f"Entries: {entries}")
    return head + "\n" + "\n".join(rows) + "\n\nTotals:" + totals


def _row(name: str, status: int = 0, hits: int = 1, duration: int = 3) -> str:
    """A row as Linux prints it: the name's raw bytes, padded (``%-50s``)."""
    return (
        f"{{ name: {name:<50}, status_code: {status:>10} }} hitcount: {hits:>10}"
        f"  duration_ns: {duration:>10}"
    )


KERNEL_ROWS = [(e.keys, e.values) for e in parse_hist(KERNEL_TEXT, {"name"}).entries]


def test_a_name_with_line_breaks_and_escapes_is_one_row_and_the_others_survive():
    name = "evil\n\x1b]0;pwned\x07\n\n\x1b[2J\x9bname"
    table = parse_hist(_with_rows(_row(name, 2, 7, 11), entries=5), {"name"})
    assert [(e.keys, e.values) for e in table.entries] == KERNEL_ROWS + [
        ({"name": name, "status_code": 2}, {"hitcount": 7, "duration_ns": 11})
    ]
    assert (table.skipped, table.surplus) == (0, 0)
    out = io.StringIO()
    merged = merge([table])
    assert merged is not None
    render({("otel", SPAN_KIND): merged}, out)
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert len(text.splitlines()) == 3 + 5  # prefix, summary, header, 5 rows
    assert "\n    evil\\n\\x1b]0;pwned\\x07\\n\\n\\x1b[2J\\u009b…  error       7  " in text


def test_a_name_holding_a_rows_ending_adds_a_row_and_the_table_says_so():
    forged = "x, status_code: 2 } hitcount: 0  duration_ns: 1\n{ name: checkout"
    table = parse_hist(_with_rows(_row(forged), entries=5), {"name"})
    assert [(e.keys, e.values) for e in table.entries][:4] == KERNEL_ROWS
    assert len(table.entries) == 6 and (table.skipped, table.surplus) == (0, 1)
    out = io.StringIO()
    merged = merge([table, table])
    assert merged is not None and (merged.skipped, merged.surplus) == (0, 2)
    render({("otel", SPAN_KIND): merged}, out)
    assert "  spans: 10 counted in 2 tracepoints, 2 rows more than the kernel counted" in (
        out.getvalue()
    )
    assert out.getvalue().splitlines()[-1].split() == ["x", "error", "0", "0.000", "-"]


def test_an_unreadable_row_is_skipped_and_counted_and_totals_come_from_the_end():
    fake_totals = "a\n\nTotals:\n    Hits: 99\n    Entries: 1\n    Dropped: 7\n"
    rows = (
        _row(fake_totals, 1),
        _row("b").replace("status_code:", "status_code: x"),  # not a number
        "{ name: not ended" + " " * 44,  # an unended row, then a row's end
        "# event histogram , status_code:          0 } hitcount:          1",
    )
    table = parse_hist(_with_rows(*rows, entries=7), {"name"})
    assert [(e.keys, e.values) for e in table.entries] == KERNEL_ROWS + [
        ({"name": fake_totals, "status_code": 1}, {"hitcount": 1, "duration_ns": 3})
    ]
    assert table.totals == Totals(hits=5, entries=7, dropped=0)
    assert (table.skipped, table.surplus) == (2, 0)
    out = io.StringIO()
    merged = merge([table])
    assert merged is not None
    render({("otel", SPAN_KIND): merged}, out)
    assert "  spans: 5 counted in 1 tracepoint, 2 rows unreadable\n" in out.getvalue()


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


_TEXT_KEY = (
    st.lists(
        st.one_of(
            st.characters(blacklist_categories=("Cs",)),
            st.sampled_from(["\n", "\x1b[2J", " } hitcount: 1", "  duration_ns: 2", "{ "]),
        ),
        max_size=20,
    )
    .map("".join)
    .map(lambda s: s.rstrip(" "))
)
"""Any text, often with line breaks and pieces of rows."""
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


def _splits(entry: HistEntry, text_keys: frozenset[str]) -> int:
    """The lines of the row's text keys, but the last, that end like a row."""
    return sum(
        1
        for key in text_keys
        for line in str(entry.keys[key]).split("\n")[:-1]
        if _ROW_END.search(line)
    )


@SETTINGS
@given(_histograms())
def test_generated_tables_survive_a_round_trip(table: Histogram):
    """Exactly, unless a name holds a line that ends like a row: then that row splits,
    the table says by how much, and every other row is read as it was."""
    parsed = parse_hist(format_hist(table), table.text_keys)
    splits = sum(_splits(entry, table.text_keys) for entry in table.entries)
    if not splits:
        assert parsed == table
        return
    assert parsed.totals == table.totals and parsed.surplus == splits
    assert len(parsed.entries) + parsed.skipped == len(table.entries) + splits
    for entry in table.entries:
        if not _splits(entry, table.text_keys):
            assert entry in parsed.entries


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


@SETTINGS
@given(
    st.lists(st.tuples(_TEXT_KEY, _NUMBER, _NUMBER, _NUMBER), max_size=6),
    st.lists(st.tuples(_TEXT_KEY, _NUMBER, _NUMBER), max_size=6),
)
def test_any_span_or_log_table_renders_on_lines_of_printable_text(
    span_rows: list[tuple[str, int, int, int]], log_rows: list[tuple[str, int, int]]
):
    spans, logs = TRIGGERS[SPAN_KIND], TRIGGERS[LOG_KIND]
    span_table = Histogram(
        spans.text, spans.keys, ("hitcount", "duration_ns"),
        tuple(HistEntry({"name": n, "status_code": s}, {"hitcount": h, "duration_ns": d})
              for n, s, h, d in span_rows),
        Totals(0, len(span_rows), 0), spans.text_keys,
    )  # fmt: skip
    log_table = Histogram(
        logs.text, logs.keys, ("hitcount",),
        tuple(HistEntry({"scope": n, "severity_number": s}, {"hitcount": h})
              for n, s, h in log_rows),
        Totals(0, len(log_rows), 0), logs.text_keys,
    )  # fmt: skip
    tables = {}
    for kind, table, trigger in ((SPAN_KIND, span_table, spans), (LOG_KIND, log_table, logs)):
        merged = merge([parse_hist(format_hist(table), trigger.text_keys)])
        assert merged is not None
        tables[("otel", kind)] = merged
    out = io.StringIO()
    render(tables, out)
    assert all(line.isprintable() for line in out.getvalue().split("\n"))
