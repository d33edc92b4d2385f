# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The kernel's histograms as a person reads them: per prefix, a table of spans by name
and status (count, total and average duration in ms) and one of logs by severity and
scope (count), most frequent first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TextIO

from opentelemetry._logs import SeverityNumber

from opentelemetry_exporter_userevents.reader.hist.hist_file import KeyValue, MergedHistogram
from opentelemetry_exporter_userevents.reader.terminal_text import cut, printable
from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record.plain_text import decode_plain
from opentelemetry_exporter_userevents.record.tracepoints import LOG_KIND, SPAN_KIND

_WIDTH = 40
_STATUS = {0: "unset", 1: "ok", 2: "error"}


def _name(value: KeyValue) -> str:
    """A plain-text key as written (the kernel keeps at most 255 bytes of it), escaped
    and cut to fit a column."""
    try:
        text = decode_plain(str(value))
    except ValueError:
        text = str(value)
    return cut(text, _WIDTH) or '""'


def _scope(value: KeyValue) -> str:
    """The scope's name from its JSON, or the text itself if cut or not ours; escaped and
    cut to fit a column."""
    try:
        scope = anyvalue.decode(str(value))
    except ValueError:
        return cut(str(value), _WIDTH)
    name = scope.get("name") if isinstance(scope, dict) else None
    return cut(name if isinstance(name, str) and name else str(value), _WIDTH)


def _severity(value: KeyValue) -> str:
    try:
        return f"{SeverityNumber(int(value)).name} ({value})"
    except ValueError:
        return cut(str(value), _WIDTH)


def _table(out: TextIO, header: Sequence[str], rows: list[list[str]], numeric: int) -> None:
    """Columns aligned; the last ``numeric`` columns to the right."""
    widths = [max(len(r[i]) for r in [list(header), *rows]) for i in range(len(header))]
    first_numeric = len(header) - numeric
    for row in [list(header), *rows]:
        cells = [
            cell.rjust(width) if i >= first_numeric else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("    " + "  ".join(cells).rstrip() + "\n")


def _doubts(table: MergedHistogram) -> str:
    """What the kernel's text did not let us read (:mod:`.hist`): rows skipped, and rows
    beyond the kernel's count, made by a name with a line break."""
    text = ""
    if table.skipped:
        text += f", {table.skipped} row{'s' if table.skipped != 1 else ''} unreadable"
    if table.surplus:
        text += (
            f", {table.surplus} row{'s' if table.surplus != 1 else ''} more than the kernel"
            " counted (a name holds a line break: rows may be made up)"
        )
    return text


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def render(tables: Mapping[tuple[str, str], MergedHistogram], out: TextIO) -> None:
    """Write each prefix's span and log tables, as the kernel counted them."""
    for prefix in sorted({p for p, _ in tables}):
        out.write(f"prefix {printable(prefix)}\n")
        for kind, label in ((SPAN_KIND, "spans"), (LOG_KIND, "logs")):
            table = tables.get((prefix, kind))
            if table is None:
                continue
            tracepoints = f"{table.tables} tracepoint{'s' if table.tables != 1 else ''}"
            dropped = f", {table.dropped} not counted (table full)" if table.dropped else ""
            out.write(
                f"  {label}: {table.hits} counted in {tracepoints}{dropped}{_doubts(table)}\n"
            )
            if not table.rows:
                continue
            ordered = sorted(table.rows.items(), key=lambda r: (-r[1]["hitcount"], str(r[0])))
            if kind == SPAN_KIND:
                rows = []
                for (name, status), values in ordered:
                    count, total = values["hitcount"], values["duration_ns"]
                    label_ = _STATUS.get(int(status), cut(str(status), _WIDTH))
                    row = [
                        _name(name),
                        label_,
                        str(count),
                        _ms(total),
                        _ms(total / count) if count else "-",
                    ]
                    rows.append(row)
                header = ["NAME", "STATUS", "COUNT", "TOTAL ms", "AVG ms"]
                _table(out, header, rows, 3)
            else:
                rows = [
                    [_severity(severity), _scope(scope), str(values["hitcount"])]
                    for (scope, severity), values in ordered
                ]
                _table(out, ["SEVERITY", "SCOPE", "COUNT"], rows, 1)
