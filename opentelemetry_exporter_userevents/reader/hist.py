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

(the row is shortened here; it goes on ``2  duration_ns:        300``). A text key is
printed as ``%-50s`` and may hold anything but a newline (``, status_code: 9 }``
included), so a row is read from its right end: the values, then the numeric keys; what is
left is the first key. Which keys are text is the caller's knowledge (the schema), not
something the padding can tell. Only ValueError is raised, for any text that is not such
a table.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
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


_TRIGGER_INFO = "# trigger info: "
_VALUE = re.compile(r"  (\w+): +([0-9]+)", re.ASCII)
_ROW = re.compile(
    r"^\{ (?P<keys>.*) \} hitcount: +(?P<hits>[0-9]+)(?P<vals>(?:  \w+: +[0-9]+)*)$", re.ASCII
)
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
    are text fields (the others are numbers). ValueError on anything else."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    lines = text.split("\n")
    trigger: str | None = None
    keys: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    entries: list[HistEntry] = []
    totals: dict[str, int] = {}
    section = "head"
    for number, line in enumerate(lines, 1):
        if section == "head" and line.startswith("#"):
            if line.startswith(_TRIGGER_INFO):
                if trigger is not None:
                    raise ValueError(f"line {number}: a second histogram (one trigger expected)")
                trigger = line[len(_TRIGGER_INFO) :].removesuffix(" [active]")
                trigger = trigger.removesuffix(" [paused]")
                keys, values = _fields(trigger)
            continue
        if line == "":
            continue
        if line == "# event histogram":
            raise ValueError(f"line {number}: a second histogram (one trigger expected)")
        if line.startswith("{ ") and section in ("head", "rows"):
            if trigger is None:
                raise ValueError(f"line {number}: a row before the trigger info line")
            section = "rows"
            entries.append(_row(line, number, keys, values, text_keys))
        elif line == "Totals:" and section in ("head", "rows"):
            section = "totals"
        elif section == "totals" and (match := _TOTAL.match(line)):
            if match[1] in totals:
                raise ValueError(f"line {number}: {match[1]} given twice")
            totals[match[1]] = int(match[2])
        else:
            raise ValueError(f"line {number}: not part of a hist table: {line[:80]!r}")
    if trigger is None:
        raise ValueError("no histogram (no '# trigger info:' line; is a hist trigger set?)")
    if len(totals) != 3:
        raise ValueError("no Totals section with Hits, Entries and Dropped")
    if totals["Entries"] != len(entries):
        raise ValueError(f"Entries says {totals['Entries']}, {len(entries)} rows shown")
    return Histogram(
        trigger,
        keys,
        values,
        tuple(entries),
        Totals(totals["Hits"], totals["Entries"], totals["Dropped"]),
        frozenset(k for k in keys if k in text_keys),
    )


def _row(
    line: str,
    number: int,
    keys: tuple[str, ...],
    values: tuple[str, ...],
    text_keys: Collection[str],
) -> HistEntry:
    match = _ROW.match(line)
    if match is None:
        raise ValueError(f"line {number}: not a hist row: {line[:80]!r}")
    sums = {"hitcount": int(match["hits"])}
    sums.update((name, int(value)) for name, value in _VALUE.findall(match["vals"]))
    if tuple(sums) != values:
        raise ValueError(f"line {number}: values {tuple(sums)} where the trigger has {values}")
    rest = match["keys"]
    found: dict[str, KeyValue] = {}
    for name in reversed(keys[1:]):
        at = rest.rfind(f", {name}: ")
        if at < 0:
            raise ValueError(f"line {number}: key {name!r} missing")
        found[name] = _key(rest[at + len(name) + 4 :], name, number, text_keys)
        rest = rest[:at]
    if not rest.startswith(f"{keys[0]}: "):
        raise ValueError(f"line {number}: key {keys[0]!r} missing")
    found[keys[0]] = _key(rest[len(keys[0]) + 2 :], keys[0], number, text_keys)
    return HistEntry({k: found[k] for k in keys}, sums)


def _key(value: str, name: str, number: int, text_keys: Collection[str]) -> KeyValue:
    if name in text_keys:
        return value.rstrip(" ")
    digits = value.strip(" ")
    if not digits.isascii() or not digits.isdigit():
        raise ValueError(f"line {number}: key {name!r} is not a number: {value[:40]!r}")
    return int(digits)


def format_hist(histogram: Histogram) -> str:
    """The ``hist`` file text of ``histogram``, as the kernel prints it (the inverse of
    :func:`parse_hist`, for tests and tools that show the kernel's view)."""
    out = [
        "# event histogram",
        "#",
        f"{_TRIGGER_INFO}{histogram.trigger} [active]",
        "#",
        "",
    ]
    for entry in histogram.entries:
        keys = ", ".join(
            f"{k}: {v:<50}" if k in histogram.text_keys else f"{k}: {v:>10}"
            for k, v in entry.keys.items()
        )
        sums = "".join(
            f" hitcount: {v:>10}" if k == "hitcount" else f"  {k}: {v:>10}"
            for k, v in entry.values.items()
        )
        out.append(f"{{ {keys} }}{sums}")
    totals = histogram.totals
    out += ["", "Totals:", f"    Hits: {totals.hits}", f"    Entries: {totals.entries}"]
    out += [f"    Dropped: {totals.dropped}", "", ""]
    return "\n".join(out)


@dataclass
class MergedHistogram:
    """Several tables of the same trigger (one per tracepoint version or layout) added up."""

    key_fields: tuple[str, ...]
    value_fields: tuple[str, ...]
    rows: dict[tuple[KeyValue, ...], dict[str, int]] = field(default_factory=dict)
    hits: int = 0
    dropped: int = 0
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
        self.tables += 1


def merge(histograms: Iterable[Histogram]) -> MergedHistogram | None:
    """The sum of tables with the same key and value fields; None if there are none."""
    merged: MergedHistogram | None = None
    for histogram in histograms:
        if merged is None:
            merged = MergedHistogram(histogram.key_fields, histogram.value_fields)
        merged.add(histogram)
    return merged
