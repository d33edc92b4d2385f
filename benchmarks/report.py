# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The figures of one run: tables, the targets as ratios, and the plot (matplotlib is
optional: the ``bench`` extra)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.configs import LABELS

SIGNALS = ("spans", "logs", "logging")
UNITS = {"spans": "span", "logs": "log record", "logging": "logging call"}


def guests(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each kernel image's guest run, by image name (an older results file has one,
    ``guest``)."""
    found = dict(results.get("guests") or {})
    if results.get("guest"):
        found.setdefault("guest", results["guest"])
    return {name: run for name, run in found.items() if run}


@dataclass
class Target:
    name: str
    signal: str
    where: str
    value: float | None
    limit: float
    formula: str
    floor: float | None = None
    """The same ratio for the reference that costs the least possible (c_floor, g_off, d_floor)."""
    times: bool = False
    """Shown as a multiple (1.50x), not as a share (20.0%)."""

    @property
    def met(self) -> bool | None:
        return None if self.value is None else self.value <= self.limit

    def line(self) -> str:
        if self.value is None:
            return (
                f"- {self.name} ({self.signal}, {self.where}): not measured (no {self.where} run)"
            )
        verdict = "met" if self.met else "MISSED"
        show = (lambda v: f"{v:.2f}x") if self.times else (lambda v: f"{v:.1%}")
        floor = "" if self.floor is None else f"; the least possible: {show(self.floor)}"
        return (
            f"- {self.name} ({self.signal}, {self.where}): {self.formula} = "
            f"{show(self.value)} (target <= {show(self.limit)}{floor}): {verdict}"
        )


def _ratio(
    run: dict[str, Any] | None, signal: str, top: str, bottom: str, minus: str = ""
) -> float | None:
    """(top - minus) / (bottom - minus) of the best figures, None if one is missing."""
    values = [_best(run, signal, key) for key in (top, bottom, minus or top)]
    if None in values:
        return None
    t, b, m = values
    m = m if minus else 0.0
    return (t - m) / (b - m)  # type: ignore[operator]


def _best(run: dict[str, Any] | None, signal: str, key: str) -> float | None:
    if not run:
        return None
    found = run.get(signal, {}).get(key)
    return found["best"] if found else None


def targets(results: dict[str, Any]) -> list[Target]:
    """The issue's targets, each a ratio from one run: the disabled processor, the sampler
    and the logging handler on the host (the guest's emulation is noisier than 0.5%), the
    encoding share in each guest (d against e, both over b)."""
    host = results.get("host")
    found = []
    for signal in ("spans", "logs"):
        over = _difference(host, signal, "c", "c_floor")
        floor = _ratio(host, signal, "c_floor", "b")
        found.append(Target("Disabled processor over a processor that does nothing", signal,
                            "host", over, 0.005, "(c - c_floor) / b",
                            None if floor is None else floor - 1))  # fmt: skip
        for name, run in (guests(results) or {"guest": None}).items():
            share = _ratio(run, signal, "d", "e", minus="b")
            floor = _ratio(run, signal, "d_floor", "e", minus="b")
            found.append(Target("Encode and write when listened, as a share of OTLP encoding",
                                signal, name, share, 0.2, "(d - b) / (e - b)", floor))  # fmt: skip
    found.append(Target("Traced request with the sampler, nobody listening, vs NoOp", "spans",
                        "host", _ratio(host, "spans", "g", "a"), 1.25, "g / a",
                        _ratio(host, "spans", "g_off", "a"), times=True))  # fmt: skip
    found.append(Target("logging call, nobody listening, vs no OpenTelemetry handler",
                        "logging", "host", _ratio(host, "logging", "h", "b"), 1.1, "h / b",
                        times=True))  # fmt: skip
    return found


def _difference(run: dict[str, Any] | None, signal: str, top: str, bottom: str) -> float | None:
    """(top - bottom) / b of the best figures."""
    values = [_best(run, signal, key) for key in (top, bottom, "b")]
    if None in values or not values[2]:
        return None
    t, m, b = values
    return (t - m) / b  # type: ignore[operator]


def table(results: dict[str, Any], signal: str) -> str:
    """An RST table: host microseconds per operation, and each run's multiple of b."""
    host, runs = results.get("host"), guests(results)
    measured = [host, *runs.values()]
    keys = [k for k in LABELS[signal] if any(_best(run, signal, k) for run in measured)]
    head = ["", "Configuration", f"Host µs per {UNITS[signal]}", "Host, × b"]
    head += [f"{name}, × b" for name in runs]
    rows = [
        [key, LABELS[signal][key], _micros(host, signal, key), _times(host, signal, key)]
        + [_times(run, signal, key) for run in runs.values()]
        for key in keys
    ]
    return _rst([head, *rows])


def _micros(run: dict[str, Any] | None, signal: str, key: str) -> str:
    best = _best(run, signal, key)
    return "" if best is None else f"{best / 1000:.2f}"


def _times(run: dict[str, Any] | None, signal: str, key: str) -> str:
    best, b = _best(run, signal, key), _best(run, signal, "b")
    return "" if best is None or not b else f"{best / b:.3f}"


def _rst(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, _row(rows[0], widths), rule, *(_row(r, widths) for r in rows[1:]), rule]
    return "\n".join(lines)


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def text(results: dict[str, Any]) -> str:
    """The whole report: the machines, the tables, and the targets."""
    parts = []
    for where, run in [("host", results.get("host")), *guests(results).items()]:
        if run:
            parts.append(
                f"{where}: {run['machine']}; {run['n']} operations x {run['rounds']} "
                "rounds, best round"
            )
    for signal in SIGNALS:
        parts += ["", f"{signal.capitalize()}:", "", table(results, signal)]
    parts += ["", "Targets (ratios from one run):", *(t.line() for t in targets(results))]
    parts += ["", "EventHeader against the default format (ratios from one run):"]
    parts += formats(results)
    return "\n".join(parts)


def formats(results: dict[str, Any]) -> list[str]:
    """What ``format="eventheader"`` costs beside the default format: not listened to, c_eh
    against c over b; listened to, what encoding and writing add to b, d_eh - b against d - b."""
    lines = []
    runs = [("host", results.get("host")), *guests(results).items()]
    for signal in ("spans", "logs"):
        for where, run in runs:
            off = _ratio(run, signal, "c_eh", "c")
            on = _ratio(run, signal, "d_eh", "d", minus="b")
            if off is None and on is None:
                continue
            shown = [] if off is None else [f"nobody listening c_eh / c = {off:.3f}"]
            shown += [] if on is None else [f"listened (d_eh - b) / (d - b) = {on:.2f}x"]
            lines.append(f"- {signal}, {where}: " + "; ".join(shown))
    return lines or ["- not measured"]


_COLORS = {
    "c": "#4c72b0",
    "c_eh": "#8da0cb",
    "d": "#4c72b0",
    "d_eh": "#8da0cb",
    "d_floor": "#9a9a9a",
    "g": "#4c72b0",
    "h": "#4c72b0",
    "e": "#c44e52",
    "f": "#c44e52",
    "h_sdk": "#c44e52",
}
"""This exporter in blue (light: ``format="eventheader"``), what a user would otherwise pick
in red, references in grey."""


def plot(results: dict[str, Any], path: str) -> bool:
    """Per-operation cost by configuration, as a PNG; False without matplotlib."""
    try:
        import matplotlib  # noqa: PLC0415 - optional

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    host, runs = results.get("host"), guests(results)
    columns = [(host, "host, µs per {unit}")] + [
        (run, f"{name}\n(emulated), × b") for name, run in runs.items()
    ]
    figure, axes = plt.subplots(
        len(SIGNALS), len(columns), figsize=(6 + 4 * len(columns), 10), squeeze=False,
        width_ratios=(2.2, *[1] * (len(columns) - 1)), constrained_layout=True,
    )  # fmt: skip
    for row, signal in enumerate(SIGNALS):
        for column, (run, title) in enumerate(columns):
            ax = axes[row][column]
            keys = [k for k in LABELS[signal] if _best(run, signal, k)]
            if not keys:
                ax.set_axis_off()
                continue
            b = _best(run, signal, "b") or 1
            values = [_best(run, signal, k) or 0 for k in keys]
            values = [v / 1000 for v in values] if column == 0 else [v / b for v in values]
            colors = [_COLORS.get(k, "#9a9a9a") for k in keys]
            names = [f"{k}: {LABELS[signal][k]}" for k in keys] if column == 0 else keys
            ax.barh(names, values, color=colors)
            ax.invert_yaxis()
            ax.set_title(f"{signal.capitalize()}, {title.format(unit=UNITS[signal])}")
            for y, value in enumerate(values):
                ax.text(value, y, f" {value:.2f}", va="center", fontsize=8)
            ax.tick_params(axis="y", labelsize=8)
            ax.margins(x=0.18)
    figure.suptitle("Cost per operation by configuration (4 attributes, 1 event per span)")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True
