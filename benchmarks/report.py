# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The figures of one run: tables, the targets as ratios, and the plot (matplotlib is
optional: the ``bench`` extra)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.configs import LABELS

SIGNALS = ("spans", "logs")


@dataclass
class Target:
    name: str
    signal: str
    where: str
    value: float | None
    limit: float
    formula: str
    floor: float | None = None
    """The same ratio for the reference that costs the least possible (c_floor, g_off)."""
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
    """The issue's targets, each a ratio from one run: the disabled exporter and the sampler
    on the host (the guest's emulation is noisier than 2%), d against e in the guest."""
    host, guest = results.get("host"), results.get("guest")
    found = []
    for signal in SIGNALS:
        over = _ratio(host, signal, "c", "b")
        floor = _ratio(host, signal, "c_floor", "b")
        found.append(Target("Disabled exporter on top of the SDK", signal, "host",
                            None if over is None else over - 1, 0.02, "(c - b) / b",
                            None if floor is None else floor - 1))  # fmt: skip
        share = _ratio(guest, signal, "d", "e", minus="b")
        found.append(Target("Encode and write when listened, as a share of OTLP encoding",
                            signal, "guest", share, 0.2, "(d - b) / (e - b)"))  # fmt: skip
    found.append(Target("Traced request with the sampler, nobody listening, vs NoOp", "spans",
                        "host", _ratio(host, "spans", "g", "a"), 1.25, "g / a",
                        _ratio(host, "spans", "g_off", "a"), times=True))  # fmt: skip
    return found


def table(results: dict[str, Any], signal: str) -> str:
    """An RST table: host microseconds per operation, and each run's multiple of b."""
    host, guest = results.get("host"), results.get("guest")
    keys = [k for k in LABELS[signal] if _best(host, signal, k) or _best(guest, signal, k)]
    unit = "span" if signal == "spans" else "log record"
    head = ["", "Configuration", f"Host µs per {unit}", "Host, × b", "Guest, × b"]
    rows = [
        [
            key,
            LABELS[signal][key],
            _micros(host, signal, key),
            _times(host, signal, key),
            _times(guest, signal, key),
        ]
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
    """The whole report: the machine, both tables, and the targets."""
    parts = []
    for where in ("host", "guest"):
        run = results.get(where)
        if run:
            parts.append(
                f"{where}: {run['machine']}; {run['n']} operations x {run['rounds']} "
                "rounds, best round"
            )
    for signal in SIGNALS:
        parts += ["", f"{signal.capitalize()}:", "", table(results, signal)]
    parts += ["", "Targets (ratios from one run):", *(t.line() for t in targets(results))]
    return "\n".join(parts)


_COLORS = {"c": "#4c72b0", "d": "#4c72b0", "g": "#4c72b0", "e": "#c44e52", "f": "#c44e52"}
"""This exporter in blue, what a user would otherwise pick in red, references in grey."""


def plot(results: dict[str, Any], path: str) -> bool:
    """Per-operation cost by configuration, as a PNG; False without matplotlib."""
    try:
        import matplotlib  # noqa: PLC0415 - optional

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    host, guest = results.get("host"), results.get("guest")
    figure, axes = plt.subplots(
        2, 2, figsize=(12, 7.5), width_ratios=(2.2, 1), constrained_layout=True
    )
    for row, signal in enumerate(SIGNALS):
        unit = "span" if signal == "spans" else "log record"
        for column, (run, title) in enumerate(
            ((host, f"host, µs per {unit}"), (guest, "test bed\n(emulated), × b"))
        ):
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
            ax.set_title(f"{signal.capitalize()}, {title}")
            for y, value in enumerate(values):
                ax.text(value, y, f" {value:.2f}", va="center", fontsize=8)
            ax.tick_params(axis="y", labelsize=8)
            ax.margins(x=0.18)
    figure.suptitle("Cost per operation by configuration (4 attributes, 1 event per span)")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True
