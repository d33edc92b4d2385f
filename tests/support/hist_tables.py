# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Hist tables for tests: a :class:`Histogram` printed as the kernel prints its ``hist``
file (the inverse of :func:`parse_hist`), and several tables added up."""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry_exporter_userevents.reader.hist.hist_file import Histogram, MergedHistogram


def format_hist(histogram: Histogram) -> str:
    """The ``hist`` file text of ``histogram``, as Linux 6.12 prints it
    (``hist_trigger_show``: text keys ``%-50s``, numbers ``%10llu``)."""
    out = [
        "# event histogram",
        "#",
        f"# trigger info: {histogram.trigger} [active]",
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
    out += [f"    Dropped: {totals.dropped}", ""]
    return "\n".join(out)


def merge(histograms: Iterable[Histogram]) -> MergedHistogram | None:
    """The sum of tables with the same key and value fields; None if there are none."""
    merged: MergedHistogram | None = None
    for histogram in histograms:
        if merged is None:
            merged = MergedHistogram(histogram.key_fields, histogram.value_fields)
        merged.add(histogram)
    return merged
