# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The text of a tracefs ``hist`` file, parsed: the kernel's own histogram of an event.

A hist trigger (``hist:keys=name,status_code:vals=hitcount,duration_ns``) makes the kernel
count the event's records per key and sum value fields, with no record read by anyone.
The ``hist`` file prints that table (Linux 6.12, ``kernel/trace/trace_events_hist.c``)::

    # event histogram
    #
    # trigger info: hist:keys=name,status_code:vals=hitcount,duration_ns:sort=... [active]
    #

    { name: checkout                          , status_code:          2 } hitcount:  ...

    Totals:
        Hits: 2
        Entries: 1
        Dropped: 0

(the row is shortened here; it goes on ``2  duration_ns:        300``). The kernel prints a
text key with ``seq_printf("%s: %-50s")``: its raw bytes (up to 255 and the first NUL),
unescaped, so it may hold ``, status_code: 9 }``, terminal escapes, and line breaks.
A row is therefore read from its right end (the values, then the numeric keys; what is left
is the first key), and a row ends at the first line that ends like one
(`` } hitcount: N  duration_ns: M``): a name with line breaks spreads its row over several
lines, which are joined. Which keys are text is the caller's knowledge (the schema), not
something the padding can tell.

Any writer of the event chooses the names, so the text is read to survive them: the header
is read from the start and ``Totals`` from the end (no name reaches either), a row that
cannot be read is skipped and counted (:attr:`Histogram.skipped`), and a name that holds a
whole row's ending on a line of its own splits its row in two, which shows as more rows
than the kernel's ``Entries`` (:attr:`Histogram.surplus`): the table says so rather than
guess which. Only ValueError is raised, for a text that is not such a table.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

KeyValue = str | int


@dataclass(frozen=True)
class HistEntry:
    """One row: the values of the keys, and the sums (``hitcount`` first)."""

    keys: dict[str, KeyValue]
    values: dict[str, int]

    @property
    def hitcount(self) -> int:
        return self.values["hitcount"]


@dataclass(frozen=True)
class Totals:
    hits: int
    entries: int
    dropped: int
    """Records not counted because the table was full (``size=`` entries)."""


@dataclass(frozen=True)
class Histogram:
    """One hist trigger's table, as its ``hist`` file shows it."""

    trigger: str
    """The trigger as the kernel shows it (``hist:keys=...:size=2048``, no ``[active]``)."""
    key_fields: tuple[str, ...]
    value_fields: tuple[str, ...]
    """``hitcount`` first, then the fields summed."""
    entries: tuple[HistEntry, ...]
    totals: Totals
    text_keys: frozenset[str] = frozenset()
    """The keys that are text fields (printed left-aligned, ``%-50s``)."""
    skipped: int = 0
    """Rows that could not be read (not in :attr:`entries`)."""
    surplus: int = 0
    """Rows seen beyond the kernel's ``Entries``: a text key with a line break made some
    of them (the rows shown may then hold made-up ones)."""


_TRIGGER_INFO = "# trigger info: "
_VALUE = re.compile(r"  (\w+): +([0-9]+)", re.ASCII)
_ROW = re.compile(
    r"\{ (?P<keys>.*) \} hitcount: +(?P<hits>[0-9]+)(?P<vals>(?:  \w+: +[0-9]+)*)",
    re.ASCII | re.DOTALL,
)
_ROW_END = re.compile(r" \} hitcount: +[0-9]+(?:  \w+: +[0-9]+)*$", re.ASCII)
_TOTAL = re.compile(r"^    (Hits|Entries|Dropped): ([0-9]+)$")
_FIELD = re.compile(r"^\w+$", re.ASCII)


def _fields(trigger: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The key and value fields a trigger names (``keys=a,b``, ``vals=hitcount,c``)."""
    if not trigger.startswith("hist:"):
        raise ValueError(f"not a hist trigger: {trigger!r}")
    parts = dict(p.partition("=")[::2] for p in trigger.split(":")[1:] if "=" in p)
    keys = tuple(parts.get("keys", parts.get("key", "")).split(","))
    values = ("hitcount", *(v for v in parts.get("vals", parts.get("values", "")).split(",")))
    values = tuple(dict.fromkeys(v for v in values if v))
    for name in keys + values:
        if not _FIELD.match(name):
            raise ValueError(f"unsupported field {name!r} in trigger {trigger!r}")
    return keys, values


def parse_hist(text: str | bytes, text_keys: Collection[str] = ()) -> Histogram:
    """The table of a ``hist`` file with one hist trigger; ``text_keys`` are the keys that
    are text fields (the others are numbers). Rows that cannot be read are skipped and
    counted. ValueError for a text that is not a hist table."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    lines = text.split("\n")
    trigger: str | None = None
    keys: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    at = 0
    while at < len(lines) and lines[at].startswith("#"):  # the head: no row reaches it
        if lines[at].startswith(_TRIGGER_INFO):
            if trigger is not None:
                raise ValueError(f"line {at + 1}: a second histogram (one trigger expected)")
            trigger = lines[at][len(_TRIGGER_INFO) :].removesuffix(" [active]")
            trigger = trigger.removesuffix(" [paused]")
            keys, values = _fields(trigger)
        at += 1
    if trigger is None:
        raise ValueError("no histogram (no '# trigger info:' line; is a hist trigger set?)")
    totals, end = _totals(lines, at)
    entries: list[HistEntry] = []
    rows = skipped = 0
    row: list[str] = []
    for line in lines[at:end]:
        if not row and line == "":
            continue  # between rows; inside one, an empty line is part of a name
        row.append(line)
        if _ROW_END.search(line):
            rows += 1
            entry = _row("\n".join(row), keys, values, text_keys)
            if entry is None:
                skipped += 1
            else:
                entries.append(entry)
            row = []
    if row:  # lines after the last row's end: not a row the kernel printed
        rows += 1
        skipped += 1
    if rows < totals["Entries"]:  # a name can split a row, never hide one
        raise ValueError(f"Entries says {totals['Entries']}, {rows} rows shown")
    return Histogram(
        trigger,
        keys,
        values,
        tuple(entries),
        Totals(totals["Hits"], totals["Entries"], totals["Dropped"]),
        frozenset(k for k in keys if k in text_keys),
        skipped,
        rows - totals["Entries"],
    )


def _totals(lines: list[str], start: int) -> tuple[dict[str, int], int]:
    """``Totals`` from the end of the text (no row reaches past it), and where it starts."""
    end = len(lines)
    while end > start and lines[end - 1] == "":
        end -= 1
    totals: dict[str, int] = {}
    for name in ("Dropped", "Entries", "Hits"):
        match = _TOTAL.match(lines[end - 1]) if end > start else None
        if match is None or match[1] != name:
            raise ValueError("no Totals section with Hits, Entries and Dropped at the end")
        totals[name] = int(match[2])
        end -= 1
    if end <= start or lines[end - 1] != "Totals:":
        raise ValueError("no Totals section with Hits, Entries and Dropped at the end")
    return totals, end - 1


def _row(
    text: str,
    keys: tuple[str, ...],
    values: tuple[str, ...],
    text_keys: Collection[str],
) -> HistEntry | None:
    """One row (its lines joined), or None if it is not a row of this trigger."""
    match = _ROW.fullmatch(text)
    if match is None:
        return None
    sums = {"hitcount": int(match["hits"])}
    sums.update((name, int(value)) for name, value in _VALUE.findall(match["vals"]))
    if tuple(sums) != values:
        return None
    rest = match["keys"]
    found: dict[str, KeyValue] = {}
    for name in reversed(keys[1:]):
        at = rest.rfind(f", {name}: ")
        if at < 0:
            return None
        key = _key(rest[at + len(name) + 4 :], name, text_keys)
        if key is None:
            return None
        found[name] = key
        rest = rest[:at]
    if not rest.startswith(f"{keys[0]}: "):
        return None
    key = _key(rest[len(keys[0]) + 2 :], keys[0], text_keys)
    if key is None:
        return None
    found[keys[0]] = key
    return HistEntry({k: found[k] for k in keys}, sums)


def _key(value: str, name: str, text_keys: Collection[str]) -> KeyValue | None:
    if name in text_keys:
        return value.rstrip(" ")
    digits = value.strip(" ")
    if not digits.isascii() or not digits.isdigit():
        return None
    return int(digits)


@dataclass
class MergedHistogram:
    """Several tables of the same trigger (one per tracepoint version or layout) added up."""

    key_fields: tuple[str, ...]
    value_fields: tuple[str, ...]
    rows: dict[tuple[KeyValue, ...], dict[str, int]] = field(default_factory=dict)
    hits: int = 0
    dropped: int = 0
    skipped: int = 0
    """Rows that could not be read (:attr:`Histogram.skipped`)."""
    surplus: int = 0
    """Rows beyond the kernels' count (:attr:`Histogram.surplus`)."""
    tables: int = 0

    def add(self, histogram: Histogram) -> None:
        if (histogram.key_fields, histogram.value_fields) != (self.key_fields, self.value_fields):
            raise ValueError(f"cannot merge {histogram.trigger!r} with other fields")
        for entry in histogram.entries:
            zeros = dict.fromkeys(self.value_fields, 0)
            row = self.rows.setdefault(tuple(entry.keys.values()), zeros)
            for name, value in entry.values.items():
                row[name] += value
        self.hits += histogram.totals.hits
        self.dropped += histogram.totals.dropped
        self.skipped += histogram.skipped
        self.surplus += histogram.surplus
        self.tables += 1
