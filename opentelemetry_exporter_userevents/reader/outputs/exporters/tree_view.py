# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A human view of rebuilt telemetry: each trace as a tree of spans, log lines, and one
line per metric data point.

A trace is printed when its local root ends (children end first, so by then the tree is
whole); spans whose root never arrives are printed by :meth:`TreeView.flush`. Logs are
printed as they come.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import MetricPoint
from opentelemetry_exporter_userevents.reader.terminal_text import cut, printable
from opentelemetry_exporter_userevents.reader.views.kernel_view import OFF_CPU_EVENT, VIEW
from opentelemetry_exporter_userevents.record import metric_values as mv

KEY_ATTRIBUTES = 4
"""Attributes shown per span or log line."""
_VALUE_WIDTH = 40


def _time(ns: int | None) -> str:
    if not ns:
        return "-"
    when = datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _value(value: Any, width: int = _VALUE_WIDTH) -> str:
    return cut(repr(value) if not isinstance(value, str) else value, width)


def _attributes(attributes: Mapping[str, Any] | None) -> str:
    if not attributes:
        return ""
    shown = [f"{_value(k)}={_value(v)}" for k, v in list(attributes.items())[:KEY_ATTRIBUTES]]
    more = len(attributes) - KEY_ATTRIBUTES
    return " ".join(shown) + (f" (+{more})" if more > 0 else "")


def _duration(span: ReadableSpan) -> str:
    return _ns(max((span.end_time or 0) - (span.start_time or 0), 0))


def _ns(ns: int) -> str:
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e3:.1f} µs"


def _status(span: ReadableSpan) -> str:
    code = span.status.status_code
    if code is StatusCode.ERROR:
        description = span.status.description
        return f"ERROR: {printable(description)}" if description else "ERROR"
    return code.name


def _service(resource: Any) -> str:
    """The service's name, and its container's short id (its first 12 characters, as
    ``docker ps`` shows it) in brackets when the resource names one (``record`` adds it)."""
    if not resource:
        return ""
    service = printable(str(resource.attributes.get("service.name", "")))
    container = resource.attributes.get("container.id")
    if isinstance(container, str) and container:
        return f"{service} [{printable(container[:12])}]"
    return service


MAX_WAITING_SPANS = 100_000
"""Spans held while they wait for their trace's root. Past it (or past
:data:`MAX_WAITING_TRACES` traces), the oldest trace is printed as it is, marked: a writer
whose roots never come cannot grow the reader without bound."""
MAX_WAITING_TRACES = 10_000
MAX_DEPTH = 32
"""Levels of a tree drawn indented; deeper spans are drawn at this depth, marked with
their own (a chain of any length prints in bounded width, with no recursion)."""


class TreeView:
    """Writes spans as trace trees and logs as lines to ``out``.

    Every span given is printed exactly once, whatever its parent links say: a span that is
    its own parent, or spans that are each other's parent, are printed as roots, marked
    ``(own parent)`` or ``(parent cycle)``; a span whose parent is not in the trace,
    ``(parent ... not seen)``. A span id seen twice is printed twice, its children under the
    first."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._traces: dict[int, list[ReadableSpan]] = {}
        """Spans waiting for their trace's root, by trace id, oldest trace first."""
        self._waiting = 0
        self.printed_early = 0
        """Traces printed before their root came, to keep within the limits."""

    def add(self, items: Iterable[ReadableSpan | ReadableLogRecord | MetricPoint]) -> None:
        for item in items:
            if isinstance(item, ReadableLogRecord):
                self.out.write(self.log_line(item) + "\n")
                continue
            if isinstance(item, MetricPoint):
                self.out.write(metric_line(item) + "\n")
                continue
            trace_id = item.context.trace_id
            spans = self._traces.setdefault(trace_id, [])
            spans.append(item)
            self._waiting += 1
            if item.parent is None or item.parent.is_remote:
                self._print_trace(self._pop(trace_id))
                continue
            while self._waiting > MAX_WAITING_SPANS or len(self._traces) > MAX_WAITING_TRACES:
                self.printed_early += 1
                oldest = self._pop(next(iter(self._traces)))
                self._print_trace(oldest, "  (printed before its root: too many spans waiting)")
        self.out.flush()

    def flush(self) -> None:
        """Print the spans still waiting for their root."""
        for trace_id in list(self._traces):
            self._print_trace(self._pop(trace_id))
        self.out.flush()

    def _pop(self, trace_id: int) -> list[ReadableSpan]:
        spans = self._traces.pop(trace_id)
        self._waiting -= len(spans)
        return spans

    def _print_trace(self, spans: list[ReadableSpan], note: str = "") -> None:
        spans = sorted(spans, key=lambda s: s.start_time or 0)
        first: dict[int, int] = {}  # span id -> index of the first span with it
        for index, span in enumerate(spans):
            first.setdefault(span.context.span_id, index)
        parents: list[int | None] = []
        notes: list[str] = []
        for span in spans:
            parent = span.parent
            if parent is None or parent.is_remote:
                parents.append(None)
                notes.append("")
            elif parent.span_id == span.context.span_id:
                parents.append(None)
                notes.append("  (own parent)")
            elif parent.span_id in first:
                parents.append(first[parent.span_id])
                notes.append("")
            else:
                parents.append(None)
                notes.append(f"  (parent {parent.span_id:016x} not seen)")
        _break_cycles(parents, notes, spans)
        children: list[list[int]] = [[] for _ in spans]
        roots: list[int] = []
        for index, parent_index in enumerate(parents):
            (roots if parent_index is None else children[parent_index]).append(index)
        self.out.write(
            f"trace {spans[0].context.trace_id:032x}  {_service(spans[0].resource)}{note}\n"
        )
        # depth-first, iterative: (span index, indent, branch, depth)
        stack = [(index, "  ", "", 0) for index in reversed(roots)]
        while stack:
            index, indent, branch, depth = stack.pop()
            span = spans[index]
            deep = f"  (depth {depth})" if depth > MAX_DEPTH else ""
            self._print_span(span, indent + branch, notes[index] + deep)
            inner = indent
            if depth < MAX_DEPTH:
                inner += "│  " if branch == "├─ " else "   " if branch else ""
            kids = children[index]
            for number in range(len(kids) - 1, -1, -1):
                last = number == len(kids) - 1
                stack.append((kids[number], inner, "└─ " if last else "├─ ", depth + 1))

    def _print_span(self, span: ReadableSpan, lead: str, note: str) -> None:
        kernel = kernel_line(span.attributes or {})
        shown = span.attributes
        if kernel:  # the kernel view gets a line of its own
            shown = {k: v for k, v in (shown or {}).items() if not _is_kernel_key(k)}
        attributes = _attributes(shown)
        self.out.write(
            f"{lead}{printable(span.name)}  {span.kind.name.lower()}  {_duration(span)}"
            f"  [{_status(span)}]{'  ' + attributes if attributes else ''}{note}\n"
        )
        below = lead.replace("├─ ", "│  ").replace("└─ ", "   ")
        if kernel:
            self.out.write(f"{below}   ⚙ {kernel}\n")
        for event in span.events:
            if kernel and event.name == OFF_CPU_EVENT:
                line = f"{below}   ◦ {_time(event.timestamp)}  {wait_text(event.attributes or {})}"
                self.out.write(line + "\n")
                continue
            line = f"{below}   • {printable(event.name)} {_time(event.timestamp)}"
            self.out.write(f"{line}  {_attributes(event.attributes)}".rstrip(" ") + "\n")

    @staticmethod
    def log_line(readable: ReadableLogRecord) -> str:
        record = readable.log_record
        severity = record.severity_text or (
            record.severity_number.name if record.severity_number else "-"
        )
        parts = [
            _time(record.timestamp or record.observed_timestamp),
            f"{printable(severity):<6}",
            _service(readable.resource),
        ]
        if record.event_name:
            parts.append(f"[{printable(record.event_name)}]")
        body = record.body
        parts.append(_value(body, 200) if body is not None else "")
        attributes = _attributes(record.attributes)
        if attributes:
            parts.append(attributes)
        if record.trace_id:
            parts.append(f"trace={record.trace_id:032x} span={record.span_id:016x}")
        return "  ".join(p for p in parts if p)


def _break_cycles(parents: list[int | None], notes: list[str], spans: list[ReadableSpan]) -> None:
    """Make one span of each parent cycle a root, marked, so the links form a forest."""
    state = [0] * len(parents)  # 0: not seen, 1: on the path walked now, 2: done
    for start in range(len(parents)):
        path = []
        at: int | None = start
        while at is not None and state[at] == 0:
            state[at] = 1
            path.append(at)
            at = parents[at]
        if at is not None and state[at] == 1:  # the walk came back to itself
            parent = spans[at].parent
            assert parent is not None
            notes[at] = f"  (parent cycle: parent {parent.span_id:016x})"
            parents[at] = None
        for index in path:
            state[index] = 2


_KIND_LABELS = {
    mv.KIND_SUM: "sum",
    mv.KIND_GAUGE: "gauge",
    mv.KIND_HISTOGRAM: "histogram",
    mv.KIND_EXP_HISTOGRAM: "exp_histogram",
}


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def metric_value(item: MetricPoint) -> str:
    """The point's value(s): ``value`` for sums and gauges; count, sum, min, max and the
    bucket counts for histograms."""
    point: Any = item.point
    if item.kind in (mv.KIND_SUM, mv.KIND_GAUGE):
        return _number(point.value)
    text = f"count={point.count} sum={_number(point.sum)}"
    if point.count:
        text += f" min={_number(point.min)} max={_number(point.max)}"
    if item.kind == mv.KIND_HISTOGRAM:
        buckets = " ".join(
            f"≤{_number(bound)}:{count}"
            for bound, count in zip(point.explicit_bounds, point.bucket_counts, strict=False)
            if count
        )
        overflow = point.bucket_counts[-1] if point.bucket_counts else 0
        if overflow:
            buckets += f" >{_number(point.explicit_bounds[-1]) if point.explicit_bounds else ''}"
            buckets += f":{overflow}"
        return f"{text} [{buckets.strip()}]"
    return (
        f"{text} scale={point.scale} zero={point.zero_count}"
        f" +{len(point.positive.bucket_counts)}/-{len(point.negative.bucket_counts)} buckets"
    )


def metric_line(item: MetricPoint) -> str:
    """``time  service  name{attributes}  kind (temporality)  value  unit``."""
    kind = _KIND_LABELS.get(item.kind, "?")
    if item.temporality is not None and item.kind != mv.KIND_GAUGE:
        kind += f" ({item.temporality.name.lower()}{', monotonic' if item.monotonic else ''})"
    attributes = _attributes(item.point.attributes)
    parts = [
        _time(item.point.time_unix_nano),
        "metric",
        _service(item.resource),
        printable(item.name) + (f"{{{attributes}}}" if attributes else ""),
        kind,
        metric_value(item),
        printable(item.unit),
    ]
    if item.truncated:
        parts.append("(cut to fit)")
    return "  ".join(p for p in parts if p)


def _is_kernel_key(key: str) -> bool:
    """The kernel view's names, shown on its own line (``thread.id`` is the app's own)."""
    return key.startswith("linux.")


def _int(attributes: Mapping[str, Any], key: str) -> int:
    """An integer attribute, 0 if absent or not an integer (an app may set any of these)."""
    value = attributes.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def kernel_line(attributes: Mapping[str, Any]) -> str:
    """The kernel view at a glance: ``on-CPU 12.0 ms, off-CPU 60.1 ms (sleeping 58.0 ms,
    runnable 2.1 ms), switches 3+1, 400 syscalls 3.1 ms: read 400 3.1 ms``; empty for a
    span without one."""
    view = attributes.get(VIEW)
    if view not in ("whole", "partial"):
        return "kernel: thread not watched" if view == "none" else ""
    parts = [f"on-CPU {_ns(_int(attributes, 'linux.sched.on_cpu_ns'))}",
             f"off-CPU {_ns(_int(attributes, 'linux.sched.off_cpu_ns'))}"]  # fmt: skip
    why = [
        f"{name} {_ns(_int(attributes, f'linux.sched.{name}_ns'))}"
        for name in ("runnable", "sleeping", "blocked", "other")
        if _int(attributes, f"linux.sched.{name}_ns")
    ]
    if why:
        parts[-1] += f" ({', '.join(why)})"
    parts.append(
        f"switches {_int(attributes, 'linux.sched.switches.voluntary')}"
        f"+{_int(attributes, 'linux.sched.switches.involuntary')}"
    )
    calls = f"{_int(attributes, 'linux.syscall.count')} syscalls"
    calls += f" {_ns(_int(attributes, 'linux.syscall.time_ns'))}"
    names, counts, times = (attributes.get(f"linux.syscall.top.{k}") for k in
                            ("name", "count", "time_ns"))  # fmt: skip
    if (
        isinstance(names, (list, tuple))
        and isinstance(counts, (list, tuple))
        and isinstance(times, (list, tuple))
    ):
        top = [
            f"{_value(name, 24)} {count if isinstance(count, int) else '?'} "
            f"{_ns(time) if isinstance(time, int) else '?'}"
            for name, count, time in list(zip(names, counts, times, strict=False))[:3]
        ]
        if top:
            calls += ": " + ", ".join(top)
    parts.append(calls)
    flags = [view] if view == "partial" else []
    if attributes.get("linux.thread.shared") is True:
        flags.append("shared thread")
    return printable(", ".join(parts) + "".join(f" [{flag}]" for flag in flags))


def wait_text(attributes: Mapping[str, Any]) -> str:
    """``off-CPU 202.6 ms sleeping in clock_nanosleep, woken by 38 (runnable 2.5 ms)``."""
    text = f"off-CPU {_ns(_int(attributes, 'linux.sched.off_cpu_ns'))}"
    text += f" {_value(attributes.get('linux.sched.state', '?'), 16)}"
    syscall = attributes.get("linux.syscall.name")
    if syscall is not None:
        text += f" in {_value(syscall, 24)}"
    waker = _int(attributes, "linux.sched.waker.tid")
    if waker:
        text += f", woken by {waker}"
    runnable = _int(attributes, "linux.sched.runnable_ns")
    if runnable:
        text += f" (runnable {_ns(runnable)})"
    return printable(text)
