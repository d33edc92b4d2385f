# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The test bed's half of ``benchmarks/reader_whole_process.py``: a capture of spans whose
attribute values all differ, and the live reader's CPU per span at a paced rate.

``capture``: one app (:func:`write`) registers its single-format tracepoints, ``perf record
-a`` attaches to them, then ``otel-userevents record --capture`` starts; only once both
listen does the app write, as fast as it can, so both files hold the same records. Kept in
``$TESTBED_SHARE``: ``cap.dat`` (trace.dat v6), ``perf.data`` and ``capture.json`` (the
app's counts).

``live``: the same app paced at a rate, with ``otel-userevents record -o /dev/null`` and
``trace-cmd record`` listening to it together; each one's CPU (its processes and their
children, from ``/proc``) over the writing window, divided by the spans written, and
what each costs idle (watched for ``IDLE_S`` before the app writes).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

from benchmarks.reader_memory import family  # noqa: E402
from opentelemetry_exporter_userevents import (  # noqa: E402
    UserEventsSpanExporter,
    UserEventsSpanProcessor,
)

READER = [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli"]
TICKS = os.sysconf("SC_CLK_TCK")
IDLE_S = 5.0
"""Seconds each listener is watched before the app writes: its CPU while idle."""


def distinct_span(tracer: Any, number: int) -> None:
    """The README benchmark's shape (4 attributes, 1 event), every value differing from span
    to span as ids and paths do: no two spans' attribute texts are alike."""
    with tracer.start_as_current_span(
        "GET /cart/{id}",
        attributes={"url.path": f"/cart/{number}/item/{number * 7919 % 100003}",
                    "user.id": number,
                    "session.id": f"s-{number * 2654435761 % 2**32:08x}",
                    "http.response.body.size": 17 + number * 3},
    ) as span:  # fmt: skip
        span.add_event("cart loaded", {"items": number})


def write(prefix: str, count: int, rate: float, go: Path) -> dict[str, Any]:
    """Register, say so (``go`` with ``.registered``), wait for ``go``, then write ``count``
    spans (``rate`` a second, 0: as fast as it can)."""
    exporter = UserEventsSpanExporter(prefix=prefix, multi_format=False)
    provider = TracerProvider(resource=Resource({"service.name": "bench"}))
    provider.add_span_processor(UserEventsSpanProcessor(exporter))
    tracer = provider.get_tracer("bench", "1.0")
    go.with_suffix(".registered").touch()
    deadline = time.monotonic() + 300
    while not (go.exists() and exporter.enabled) and time.monotonic() < deadline:
        time.sleep(0.02)
    start = time.monotonic()
    for number in range(count):
        if rate > 0:
            ahead = start + number / rate - time.monotonic()
            if ahead > 0.001:
                time.sleep(ahead)
        distinct_span(tracer, number)
    elapsed = time.monotonic() - start
    provider.shutdown()
    return {"spans": count, "elapsed": elapsed, "stats": exporter.stats.snapshot()}


def _cpu(pids: list[int]) -> float:
    """User + system seconds of ``pids`` (with their reaped children), from ``/proc``."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(fields[i]) for i in (11, 12, 13, 14))
        except (OSError, IndexError, ValueError):
            pass
    return total / TICKS


def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear within {seconds:.0f} s")
        time.sleep(0.05)


def _stop(process: subprocess.Popen[bytes]) -> str:
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=900)
    return err.decode(errors="replace")[-2000:]


def session(prefix: str, count: int, rate: float, tool: list[str], reader: list[str],
            directory: Path) -> dict[str, Any]:  # fmt: skip
    """The app registers; ``tool`` attaches, then the reader; then the app writes. Each
    listener's CPU over the writing window, and what each printed when stopped."""
    go = directory / "go"
    app = subprocess.Popen(
        [sys.executable, __file__, "write", prefix, str(count), str(rate), str(go)],
        stdout=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    _wait_for(go.with_suffix(".registered"), 300)
    listener = subprocess.Popen(tool, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(5)  # the tool attaches to tracepoints that exist: no file says when
    ready = directory / "ready"
    ours = subprocess.Popen([*reader, "--ready-file", str(ready)], stderr=subprocess.PIPE, cwd=ROOT)
    _wait_for(ready, 300)
    idle = {"tool": _cpu(family(listener.pid)), "reader": _cpu(family(ours.pid))}
    time.sleep(IDLE_S)  # what each costs while nothing is written
    before = {"tool": _cpu(family(listener.pid)), "reader": _cpu(family(ours.pid))}
    go.touch()
    started = time.monotonic()
    out, _ = app.communicate(timeout=3600)
    time.sleep(3)  # the last pages drained
    after = {"tool": _cpu(family(listener.pid)), "reader": _cpu(family(ours.pid))}
    window = time.monotonic() - started
    result: dict[str, Any] = json.loads(out)
    result["window_s"] = window
    result["idle_cpu_per_s"] = {k: (before[k] - idle[k]) / IDLE_S for k in idle}
    result["reader_stderr"] = _stop(ours)
    result["tool_stderr"] = _stop(listener)
    result["cpu_s"] = {k: after[k] - before[k] for k in before}
    return result


def capture(share: Path, count: int) -> None:
    prefix = "bench"
    cap, data = share / "cap.dat", share / "perf.data"
    tool = [shutil.which("perf") or "perf", "record", "-q", "-a", "-m", "4096",
            "-e", f"user_events:{prefix}_*", "-o", str(data)]  # fmt: skip
    reader = [*READER, "record", "--prefix", prefix, "--capture", str(cap),
              "--buffer-size-kb", "65536"]  # fmt: skip
    result = session(prefix, count, 0, tool, reader, share)
    (share / "capture.json").write_text(json.dumps(result))


def live(share: Path, count: int, rate: float) -> None:
    prefix = "live"
    tool = [shutil.which("trace-cmd") or "trace-cmd", "record", "-q", "-e",
            f"user_events:{prefix}_*", "-o", str(share / "live-trace.dat")]  # fmt: skip
    reader = [*READER, "record", "--prefix", prefix, "-o", "/dev/null"]
    result = session(prefix, count, rate, tool, reader, share)
    (share / "live-trace.dat").unlink(missing_ok=True)
    (share / "live.json").write_text(json.dumps(result))


if __name__ == "__main__":
    what, *rest = sys.argv[1:]
    if what == "write":
        print(json.dumps(write(rest[0], int(rest[1]), float(rest[2]), Path(rest[3]))))
    elif what == "capture":
        capture(Path(os.environ["TESTBED_SHARE"]), int(rest[0]))
    elif what == "live":
        live(Path(os.environ["TESTBED_SHARE"]), int(rest[0]), float(rest[1]))
