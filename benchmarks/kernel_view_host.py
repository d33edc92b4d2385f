# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What ``record --kernel`` adds to the reader's CPU per span, on the host: this tree against
a baseline commit, in turn, in one run.

    .venv/bin/python benchmarks/kernel_view_host.py

No test bed: each reader is ``record --workers 1 -o /dev/null`` run in a child process of
its tree (the baseline's a git worktree beside the checkout, as ``reader_start.py`` makes,
imported first), its reader fed pages of span records built by the exporter and, with
``--kernel``, its kernel instance fed pages of kernel events built from the saved Linux 6.12
formats (``tests/data/kernel_formats_6_12.json``), read through its own ``read`` (pages
parsed, records held, sorted and fed as live). The spans are the guest benchmark's
(``kernel_view_cost.py``: 4 attributes and an event, 1 ms apart) and so are their kernel
events: each span's record write after it ends (a syscall's entry and exit), a switch out
and back every other span, and in ``5 preads`` five ``pread`` calls in the span. The figure
is the child's CPU time (``process_time``: its output's thread too) from the first read (as
the test bed's figure, start-up left out) to the command's end, per span; rounds alternate
trees and modes, and medians are compared.
``--compiled-tree TREE`` adds the compiled build (docs/building.md) as a third tree.
``kernel_view_cost.py`` measures the same in the emulated test bed, where other guests on a
shared host make single readers' CPU times vary twofold.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"plain": 0, "5 preads": 5}
MODES = ("off", "on")
MS, US = 1_000_000, 1_000


def child(tree: str, shape: str, mode: str, spans: int) -> dict[str, float]:
    """In a child whose imports come from ``tree``: one reader's CPU µs per span."""
    sys.path.insert(0, tree)
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: PLC0415
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: PLC0415
        InMemorySpanExporter,
    )

    from opentelemetry_exporter_userevents._export.span_encoder import (  # noqa: PLC0415
        encode_span,
    )
    from opentelemetry_exporter_userevents.abi.ring_buffer import (  # noqa: PLC0415
        FTRACE_MAX_PAYLOAD,
    )
    from opentelemetry_exporter_userevents.reader import cli  # noqa: PLC0415
    from opentelemetry_exporter_userevents.reader.commands import record  # noqa: PLC0415
    from opentelemetry_exporter_userevents.reader.views import kernel_events  # noqa: PLC0415
    from opentelemetry_exporter_userevents.reader.views.kernel_processes import (  # noqa: PLC0415
        ProcessKey,
    )
    from tests.reader.capture.test_capture import (  # noqa: PLC0415
        RESOURCE_ID,
        SPAN_ID,
        _resource_payload,
    )
    from tests.reader.pipeline.test_worker_pool import _FakeReader, _spread  # noqa: PLC0415
    from tests.reader.views.test_kernel_view import _Formats, _record  # noqa: PLC0415
    from tests.support import pages  # noqa: PLC0415
    from tests.support.span_fixtures import RESOURCE  # noqa: PLC0415

    base = time.time_ns() - 3600 * 10**9  # before the read's start: nothing held back
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("kernel.view.cost", "1.0")
    for n in range(spans):
        start = base + n * MS
        attributes = {"http.request.method": "GET", "url.path": f"/cart/{n}",
                      "http.response.status_code": 200, "user.id": n}  # fmt: skip
        span = tracer.start_span("GET /cart/{id}", start_time=start, attributes=attributes)
        span.add_event("cart loaded", {"items": n % 5}, timestamp=start + 100 * US)
        span.end(end_time=start + 200 * US)
    provider.shutdown()
    rid, resource = _resource_payload()
    raws = [pages.record(RESOURCE_ID, resource)]
    raws += [pages.record(SPAN_ID, encode_span(s, rid, FTRACE_MAX_PAYLOAD)[0], pid=7)
             for s in memory.get_finished_spans()]  # fmt: skip
    span_pages = _spread(raws, 1, 1, [0])
    reads = [span_pages[n : n + 10] for n in range(0, len(span_pages), 10)]
    kernel_reads = _kernel_pages(pages, _record, base, spans, SHAPES[shape], len(reads))

    class Pipes:
        lost = last_read_lost = 0

        def read(self, page_size: int, count_idle_cpus: bool = True) -> list[tuple[int, bytes]]:
            return kernel_reads.pop(0) if kernel_reads else []

    class Kernel(kernel_events.KernelEvents):
        def __init__(self, tracefs: object, layout: Any, groups: tuple[str, ...]) -> None:
            super().__init__(_Formats(), layout, groups)  # type: ignore[arg-type]
            self.pipes = Pipes()  # type: ignore[assignment]

        def start(self) -> None:
            self._learn_formats()

        def close(self) -> None:
            pass

        def _list(self, tids: Any) -> list[tuple[int, int, ProcessKey]]:
            key = ProcessKey(7, 1)
            if not self.processes.listed(key):
                self.processes.add(key)
            return [(7, 0, key)]

    class Reader(_FakeReader):
        tracefs = None
        started: float | None = None

        def read(self) -> list[Any]:
            if self.started is None:  # the first read: what comes before is start-up
                self.started = time.process_time()
            return super().read()  # type: ignore[no-any-return]

        def wait(self, seconds: float) -> None:
            if not self.reads:  # all read: stop as SIGTERM does
                os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.001)

    reader = Reader(reads)
    record.tracefs_of = lambda args: None  # type: ignore[assignment]
    record.TraceReader = lambda *a, **k: reader  # type: ignore[assignment]
    kernel_events.KernelEvents = Kernel  # type: ignore[misc]
    argv = ["record", "--no-resource-detection", "--workers", "1", "-o", os.devnull]
    args = cli.parser().parse_args(argv + (["--kernel", "sched,syscalls"] if mode == "on" else []))
    out, err = open(os.devnull, "w"), open(os.devnull, "w")  # noqa: SIM115
    if os.environ.get("KERNEL_VIEW_HOST_PROFILE"):  # where the time goes, on stderr
        import cProfile  # noqa: PLC0415
        import pstats  # noqa: PLC0415

        with cProfile.Profile() as profile:
            record.record(args, out, err)
        pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    else:
        record.record(args, out, err)
    assert reader.started is not None
    return {"cpu_us": (time.process_time() - reader.started) / spans * 1e6}


def _kernel_pages(
    pages: Any, make: Any, base: int, spans: int, preads: int, reads: int
) -> list[list[tuple[int, bytes]]]:
    """The kernel events of the spans (one CPU), as pages, split into ``reads`` reads."""
    events: list[tuple[int, bytes]] = []
    switch, enter, leave = "sched/sched_switch", "syscalls/sys_enter_", "syscalls/sys_exit_"
    made: dict[tuple[str, tuple[tuple[str, int], ...]], bytes] = {}

    def record(key: str, **values: int) -> bytes:  # the same few records, made once each
        found = made.get((key, tuple(values.items())))
        if found is None:
            found = made[(key, tuple(values.items()))] = bytes(make(key, **values))
        return found

    for n in range(spans):
        at = base + n * MS + 10 * US
        for _ in range(preads):
            events.append((at, record(enter + "pread64", common_pid=7)))
            events.append((at + 3 * US, record(leave + "pread64", common_pid=7)))
            at += 6 * US
        if n % 2:
            events.append((at, record(switch, prev_pid=7, prev_state=0, next_pid=1)))
            events.append((at + 20 * US, record(switch, prev_pid=1, prev_state=1, next_pid=7)))
        at = base + n * MS + 210 * US  # its record's write, after it ended
        events.append((at, record(enter + "futex", common_pid=7)))
        events.append((at + 5 * US, record(leave + "futex", common_pid=7)))
    built, chunk, size, first, last = [], [], 0, events[0][0], events[0][0]
    for stamp, raw in events:
        event = pages.data_event(stamp - last, bytes(raw))
        if size + len(event) > 4000:
            built.append((0, pages.page(first, chunk)))
            chunk, size, first = [], 0, last
            event = pages.data_event(stamp - last, bytes(raw))
        chunk.append(event)
        size += len(event)
        last = stamp
    built.append((0, pages.page(first, chunk)))
    per = -(-len(built) // reads)
    return [built[n : n + per] for n in range(0, len(built), per)]


def measure(trees: dict[str, Path], rounds: int, spans: int) -> dict[str, Any]:
    """CPU µs per span of each reader, by tree, mode and shape, over ``rounds`` rounds."""
    runs = [(name, mode, shape) for name in trees for mode in MODES for shape in SHAPES]
    cpu: dict[tuple[str, str, str], list[float]] = {run: [] for run in runs}
    for number in range(rounds):
        for name, mode, shape in runs[number % len(runs) :] + runs[: number % len(runs)]:
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(trees[name]), shape, mode, str(spans)],
                capture_output=True, text=True, check=True, cwd=trees[name],
                env={**os.environ, "PYTHONPATH": str(trees[name])},
            )  # fmt: skip
            cpu[(name, mode, shape)].append(json.loads(done.stdout)["cpu_us"])
    return {"|".join(run): values for run, values in cpu.items()}


def report(result: dict[str, Any], baseline: str, names: tuple[str, ...] = ("this tree",)) -> str:
    median = {tuple(key.split("|")): statistics.median(v) for key, v in result["cpu"].items()}
    lines = [
        f"record --kernel sched,syscalls on the host, this tree against {baseline}: reader "
        f"CPU µs per span, median of {result['rounds']} readers of {result['spans']} spans each",
        "",
        f"{'span':10} {'tree':10} {'record':>8} {'--kernel':>9} {'added':>8}",
    ]
    added: dict[tuple[str, str], float] = {}
    for shape in SHAPES:
        for name in (*names, baseline):
            off, on = median[(name, "off", shape)], median[(name, "on", shape)]
            added[(shape, name)] = on - off
            lines.append(f"{shape:10} {name:10} {off:8.1f} {on:9.1f} {on - off:8.1f}")
    lines.append("")
    for shape in SHAPES:
        for name in names:
            now, then = added[(shape, name)], added[(shape, baseline)]
            lines.append(
                f"{shape}, {name}: --kernel adds {now:.1f} µs per span ({then:.1f} µs at "
                f"{baseline}): ×{now / then:.2f} of the baseline's added cost"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="5e51342", help="a commit (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, help="readers per tree, mode, shape")
    parser.add_argument("--spans", type=int, default=3000, help="spans per reader (3000)")
    parser.add_argument(
        "--compiled-tree", type=Path, metavar="TREE", help="also the compiled build in TREE"
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tree, shape, mode, spans = args.child
        print(json.dumps(child(tree, shape, mode, int(spans))))
        return 0
    sys.path.insert(0, str(ROOT))
    from benchmarks.reader_start import _tree  # noqa: PLC0415

    trees = {"this tree": ROOT, args.baseline: _tree(args.baseline)}
    if args.compiled_tree:  # docs/building.md: the compiled wheel's modules in a copy
        trees["compiled"] = args.compiled_tree.resolve()
    cpu = measure(trees, args.rounds, args.spans)
    names = tuple(name for name in trees if name != args.baseline)
    print(report({"cpu": cpu, "rounds": args.rounds, "spans": args.spans}, args.baseline, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
