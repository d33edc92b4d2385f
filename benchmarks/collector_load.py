# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader with a real collector under load and faults, in the test bed: what is
written, delivered, counted lost and delivered twice in each fault, the reader's memory
over the whole run, and its rate through the collector against its rate to a file.

One command, on the host:

    USER_EVENTS_KERNEL=../shared/kernel/bzImage .venv/bin/python benchmarks/collector_load.py \\
        --plot docs/collector.png

In the guest: rotel (``rotel-agent``, the tests' collector) exports to a sink that counts
each span and log record per service (``benchmarks/counting_sink.py``); the reader's
endpoint is a proxy in front of rotel that can fail as collectors fail
(``benchmarks/fault_proxy.py``). First the rate: ``--burst`` pre-encoded spans from two
writers (``benchmarks/burst_encoded.py``) to a reader writing OTLP/JSON to a file, then to
the reader of the rest of the run (``--exporter otlp_proto_http --spool DIR``), each timed
from the first span in the file, or taken by the collector (the reader's health file), to
the last. Then each
scenario of :data:`SCENARIOS` in turn: two services (``benchmarks/paced_writer.py``) write
``--rate`` spans and as many logs a second each while the fault happens, then the run waits
until every record is delivered, or none arrived for :data:`SETTLE` s. Per scenario:
records written (the kernel took them), delivered (at least once), counted lost (the
reader's health files, each reader's own: dropped and failed items, records the kernel
lost), delivered twice, and what is left unaccounted. The reader's resident size (with its
workers) is sampled every second. Some scenarios have a reader of their own:
``collector down 90 s, no spool`` one without ``--spool`` (its counts from its summary's
``delivery:`` line, at its stop), ``stalled disk`` one whose ``fsync`` stalls while a file
exists (``benchmarks/stalling_disk.py``: the test bed has no block layer), ``spool full``
one whose spool is a 1-MiB tmpfs. ``two readers on one spool`` starts a second reader on
the first's spool during an outage, then stops the first (a DaemonSet's rolling update):
the second runs the scenarios after it. ``429, Retry-After 60`` says how long after the
429 the reader asked again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.guest_run import run_in_guest, save_result  # noqa: E402
from benchmarks.reader_memory import family, status  # noqa: E402

SETTLE = 45.0
"""Seconds without a record arriving at the sink after which a scenario is taken as done
(5 s once the reader holds nothing: no request spooled, nothing queued)."""
NO_SPOOL = "collector down 90 s, no spool"
STALLED = "stalled disk"
SCENARIOS: list[tuple[str, float, list[tuple[float, str]]]] = [
    ("steady", 30, []),
    ("collector restarted", 40, [(10, "kill"), (15, "start")]),
    ("collector down 70 s", 85, [(5, "kill"), (75, "start")]),
    ("dribbling answers", 40, [(5, "dribble"), (30, "pass")]),
    ("429, Retry-After 5", 40, [(5, "429"), (30, "pass")]),
    ("500", 30, [(5, "500"), (20, "pass")]),
    ("503, 300-MiB body", 30, [(5, "huge"), (20, "pass")]),
    (
        "reader SIGKILLed in an outage",
        60,
        [(5, "kill"), (20, "kill reader"), (25, "start reader"), (45, "start")],
    ),
    (
        "two readers on one spool",
        60,
        [(5, "kill"), (15, "second reader"), (30, "stop first"), (45, "start")],
    ),
    ("429, Retry-After 60", 40, [(5, "429 60"), (30, "pass")]),
    (NO_SPOOL, 100, [(5, "kill"), (95, "start")]),
    (STALLED, 60, [(5, "kill"), (10, "stall"), (30, "unstall"), (45, "start")]),
    ("spool full", 60, [(5, "kill"), (50, "start")]),
]
"""(name, seconds of load, (second, action) during it)."""


readers_stderr: list[Path] = []
"""Every reader's stderr (progress lines and summary), kept for the result."""


class Reader:
    """``record --prefix '*'`` with an output, its ready file awaited, its RSS sampled."""

    def __init__(
        self, args: list[str], env: dict[str, str] | None = None, launcher: list[str] | None = None
    ) -> None:
        """``launcher``: what runs the command instead of ``python -m ...reader.cli``."""
        self.args, self.env = args, env
        self.launcher = launcher or ["-m", "opentelemetry_exporter_userevents.reader.cli"]
        self.start()

    def start(self) -> None:
        directory = Path(tempfile.mkdtemp())
        ready = directory / "ready"
        self.log = (directory / "stderr").open("w")
        self.process = subprocess.Popen(
            [sys.executable, *self.launcher, "record",
             "--prefix", "*", "--ready-file", str(ready), *self.args],
            stdout=subprocess.DEVNULL, stderr=self.log, cwd=ROOT,
            env={**os.environ, **(self.env or {})},
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while not (ready.exists() and ready.read_text()) and time.monotonic() < deadline:
            assert self.process.poll() is None, "the reader exited at start"
            time.sleep(0.05)
        self.stderr = directory / "stderr"
        readers_stderr.append(self.stderr)

    def rss_kib(self) -> int:
        return sum(status(pid, "VmRSS") for pid in family(self.process.pid))

    def stop(self, how: int = signal.SIGTERM) -> str:
        """Stopped (once), its last line (the summary)."""
        if self.process.poll() is None:
            self.process.send_signal(how)
            self.process.wait(timeout=600)
        self.log.close()
        lines = self.stderr.read_text().splitlines()
        return lines[-1] if lines else ""


def _health_files(spool: Path | None) -> dict[str, dict[str, Any]]:
    """Each reader's health file in ``spool`` (``health-reader-<id>.json``), by name."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(spool.glob("health-reader-*.json")) if spool is not None else []:
        try:
            found[path.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return found


KINDS = ("span", "log")


def health(spool: Path | None) -> dict[str, dict[str, int]]:
    """What each reader counted, by its health file: records the kernel lost, items dropped
    and failed for good (spans and logs), delivered, and its own ledger's unaccounted."""
    counted = {}
    for name, found in _health_files(spool).items():
        ledger = found.get("ledger", [])
        counted[name] = {
            "lost": found["lost"],
            "dropped": sum(d[3] for d in found["dropped"] if d[2] in KINDS),
            "failed": sum(f[2] for f in found["failed"] if f[0] in KINDS),
            "exported": sum(found["exported"].get(k, 0) for k in KINDS),
            "ledger_unaccounted": found.get("written", 0) + found.get("taken_over", 0)
            - sum(n for _label, n in ledger),
        }  # fmt: skip
    return counted


def counted_since(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
) -> dict[str, int]:
    """What the readers counted lost between two looks, each reader's health file (a
    reader that was killed, or stopped, keeps its last counts there)."""
    return {
        key: sum(now[key] - before.get(name, {}).get(key, 0) for name, now in after.items())
        for key in ("lost", "dropped", "failed")
    }


def flow(spool: Path | None) -> dict[str, int]:
    """Where the running readers' records are, from their health files: taken by the
    collector, queued or in the output's hands, spooled and re-sent (spans and logs), the
    spool's requests."""
    from opentelemetry_exporter_userevents.reader.outputs.health_files import (  # noqa: PLC0415
        RUNNING,
        reader_state,
    )

    total: dict[str, int] = {}
    for name, found in _health_files(spool).items():
        if spool is None or reader_state(str(spool), name) != RUNNING:
            continue
        for key, value in (
            ("exported", sum(found["exported"].get(k, 0) for k in KINDS)),
            ("inflight", sum(found["inflight"].get(k, 0) for k in KINDS)),
            ("spooled", sum(found["spooled"].get(k, 0) for k in KINDS)),
            ("resent", sum(found["resent"].get(k, 0) for k in KINDS)),
            ("spool_requests", found["spool_requests"]),
            ("dropped", sum(d[3] for d in found["dropped"] if d[2] in KINDS)),
        ):
            total[key] = total.get(key, 0) + value
    return total


def ledger_of(text: str) -> dict[str, int]:
    """The buckets of the last ``delivery:`` line of a reader's stderr, and its ``lost``."""
    line = next((x for x in reversed(text.splitlines()) if "delivery: " in x), "")
    written, _, terms = line.partition(" = ")
    found = {"written": int(written.split("delivery: ")[-1].split()[0] or 0) if line else 0}
    for sign, term in re.findall(r"(^|[+-]) ?(\d+ [^+-]+)", terms):
        number, _, label = term.strip().partition(" ")
        found[label] = found.get(label, 0) + (-1 if sign == "-" else 1) * int(number)
    summary = next((x for x in reversed(text.splitlines()) if "stopped (" in x), "")
    lost = re.search(r"\blost (\d+)", summary)
    found["kernel lost"] = int(lost[1]) if lost else 0
    return found


def _expected(wrote: dict[str, Any]) -> int:
    """Records of a writer the kernel took (its spans and logs, not its resource records)."""
    total = 0
    for kind in ("spans", "logs"):
        counts = wrote[kind]
        dropped = sum(v for k, v in counts.items() if k.startswith("dropped_"))
        total += wrote["each"] - counts["not_listened"] - dropped
    return total


def scenario(
    name: str, seconds: float, actions: list[tuple[float, str]], rate: float, context: Any
) -> dict[str, Any]:
    """``context``: the sink, rotel, the proxy, the ``reader`` (replaced by a second reader
    started on its spool when the first is stopped), its ``spool`` (None: the reader's
    counts are its summary's, at its stop) and the ``stall`` file."""
    sink, rotel, proxy, spool = (
        context["sink"],
        context["rotel"],
        context["proxy"],
        context["spool"],
    )
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    services = [f"{slug}-{n}" for n in range(2)]
    before = health(spool)
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "paced_writer.py"),
                f"load{n}",
                service,
                str(rate),
                str(seconds),
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )  # fmt: skip
        for n, service in enumerate(services)
    ]
    began, second = time.monotonic(), None
    for at, action in actions:
        time.sleep(max(0.0, began + at - time.monotonic()))
        reader = context["reader"]
        if action == "kill":
            rotel.kill()
        elif action == "start":
            rotel.start()
        elif action == "kill reader":
            reader.process.kill()
            reader.process.wait()
        elif action == "start reader":
            reader.start()
        elif action == "second reader":  # a rolling update: the new pod on the same spool
            second = Reader(reader.args, reader.env, reader.launcher)
        elif action == "stop first":
            reader.stop()
            context["reader"] = second
        elif action == "stall":
            context["stall"].touch()
        elif action == "unstall":
            context["stall"].unlink()
        else:
            proxy.set_mode(action)
    wrote = [json.loads(w.communicate(timeout=seconds + 300)[0]) for w in writers]
    written = sum(map(_expected, wrote))
    not_listened = sum(w[k]["not_listened"] for w in wrote for k in ("spans", "logs"))
    ended, deadline = time.monotonic(), time.monotonic() + 600
    while time.monotonic() < deadline:  # every record, or nothing more on its way
        delivered = sum(sink.counts(s)[0] for s in services)
        now = flow(spool)
        idle = spool is not None and not now.get("spool_requests") and not now.get("inflight")
        quiet = time.monotonic() - max(sink.last_at, ended) > (5 if idle else SETTLE)
        if delivered >= written or quiet:
            break
        time.sleep(1)
    after = health(spool)
    counted = counted_since(before, after)
    ledger: dict[str, int] = {}
    if spool is None:  # no health file: the reader's own ledger, at its stop
        context["reader"].stop()
        ledger = ledger_of(context["reader"].stderr.read_text())
        counted = {
            "lost": ledger.get("kernel lost", 0),
            "dropped": sum(n for k, n in ledger.items() if k.startswith("dropped")),
            "failed": ledger.get("not written", 0) + ledger.get("not delivered (stop timeout)", 0),
        }
    delivered = sum(sink.counts(s)[0] for s in services)
    twice = sum(sink.counts(s)[1] for s in services)
    return {
        "name": name,
        "seconds": seconds,
        "written": written,
        "not_listened": not_listened,
        "delivered": delivered,
        "twice": twice,
        **counted,
        "unaccounted": written - delivered - sum(counted.values()),
        "ledger_unaccounted": sum(h["ledger_unaccounted"] for h in after.values())
        if spool is not None
        else ledger.get("unaccounted", 0) + ledger.get("unaccounted (counted twice)", 0),
        "ledger": ledger,
        "answered": dict(proxy.answered),
        "asked_again_after": _asked_again_after(proxy.log, began),
        "services": services,
    }  # fmt: skip


def _asked_again_after(log: list[tuple[float, str]], since: float) -> float | None:
    """Seconds from the first ``429 60`` answer since ``since`` to the next request."""
    answered = [at for at, mode in log if at >= since and mode == "429 60"]
    if not answered:
        return None
    later = [at for at, _mode in log if at > answered[0]]
    return round(later[0] - answered[0], 1) if later else None


def burst(spans: int, delivered: Any, tag: str) -> dict[str, Any]:
    """``spans`` pre-encoded spans from two writers; the rate is taken from the first span
    delivered to the last (the writers' start, an interpreter's, is not the reader's)."""
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "burst_encoded.py"),
                f"{tag}{n}",
                str(spans // 2),
                "0",
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )  # fmt: skip
        for n in range(2)
    ]
    first = None
    while any(w.poll() is None for w in writers) and first is None:
        if delivered():
            first = time.monotonic()
        time.sleep(0.05)
    wrote = [json.loads(w.communicate(timeout=900)[0]) for w in writers]
    written = sum(w["spans"] for w in wrote)
    last, since = -1, time.monotonic()
    while time.monotonic() - since < SETTLE:
        got = delivered()
        if first is None and got:
            first = time.monotonic()
        if got >= written:
            break
        if got != last:
            last, since = got, time.monotonic()
        time.sleep(0.05)
    took = time.monotonic() - (first or since)
    got = delivered()
    return {"written": written, "delivered": got, "seconds": took, "per_s": got / took}


def in_guest(options: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.counting_sink import CountingSink  # noqa: PLC0415 - guest only
    from benchmarks.fault_proxy import FaultProxy  # noqa: PLC0415
    from tests.support.collector import Rotel  # noqa: PLC0415
    from tests.support.loopback import bring_loopback_up  # noqa: PLC0415

    bring_loopback_up()
    work = Path(tempfile.mkdtemp())
    sink = CountingSink()
    rotel = Rotel(sink, work / "rotel.log")
    rotel.start()
    proxy = FaultProxy(rotel.http_port)
    buffer = ["--buffer-size-kb", str(options.buffer_size_kb)]
    out = work / "out.jsonl"
    to_file = Reader(["-o", str(out), *buffer])

    seen = {"at": 0, "spans": 0, "tail": b""}

    def in_file() -> int:  # what was appended since the last look, not the whole file
        try:
            with out.open("rb") as f:
                f.seek(seen["at"])
                data = f.read()
        except OSError:
            return 0
        text = seen["tail"] + data
        seen["spans"] += text.count(b'"spanId":')
        seen["at"] += len(data)
        seen["tail"] = text[-8:]  # a key cut in two at the end is counted next time
        return seen["spans"]

    rates = {"file": burst(options.burst, in_file, "tpf")}
    to_file.stop()
    spool = work / "spool"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": proxy.url}
    common = ["--exporter", "otlp_proto_http", "--health-interval", "1", "--progress", *buffer]
    reader = Reader([*common, "--spool", str(spool)], env)
    time.sleep(2)  # its first health file
    exported_before = flow(spool).get("exported", 0)
    rates["collector"] = burst(  # taken by the collector, as the reader counts it
        options.burst, lambda: flow(spool).get("exported", 0) - exported_before, "tpc"
    )
    samples: list[tuple[float, int, str]] = []
    context: dict[str, Any] = {"sink": sink, "rotel": rotel, "proxy": proxy, "reader": reader,
                               "spool": spool, "stall": work / "stall"}  # fmt: skip
    current: dict[str, Any] = {"name": "burst"}
    started = time.monotonic()
    running = True

    timeline: list[dict[str, Any]] = []

    def sample() -> None:
        while running:
            at = time.monotonic() - started
            samples.append((at, context["reader"].rss_kib(), current["name"]))
            timeline.append({"t": round(at, 1), **flow(context["spool"])})
            time.sleep(1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    results = []
    for name, seconds, actions in SCENARIOS:
        if options.only and not any(name.startswith(o) for o in options.only):
            continue
        current["name"] = name
        if name == NO_SPOOL:  # a reader of its own, without --spool, nor a health file
            context["reader"].stop()
            context["spool"] = None
            no_spool = [c for c in common if c not in ("--health-interval", "1")]
            context["reader"] = Reader([*no_spool, "--health-interval", "0"], env)
        elif name == STALLED:  # a reader of its own, whose fsync stalls while "stall" exists
            context["reader"].stop()
            context["spool"] = work / "stalled-spool"
            launcher = [str(ROOT / "benchmarks" / "stalling_disk.py"), str(context["stall"])]
            context["reader"] = Reader([*common, "--spool", str(context["spool"])], env, launcher)
        elif name == "spool full":
            context["reader"].stop()
            small = work / "small"
            small.mkdir()
            mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)]
            subprocess.run(mount, check=True)
            context["spool"] = small / "spool"
            context["reader"] = Reader([*common, "--spool", str(context["spool"])], env)
        results.append(scenario(name, seconds, actions, options.rate, context))
        print(json.dumps(results[-1]), flush=True)
    running = False
    sampler.join()
    summary = context["reader"].stop()
    rotel.stop()
    stderr_tails = {str(p): _tail(p) for p in readers_stderr}
    return {
        "rates": rates,
        "scenarios": results,
        "rss": samples,
        "timeline": timeline,
        "late": {row["name"]: sum(sink.counts(s)[0] for s in row["services"]) for row in results},
        "summary": summary,
        "rate": options.rate,
        "sink_errors": sink.errors[:10],
        "stderr": stderr_tails,
        "rotel_log": _tail(work / "rotel.log") + rotel.console(),
    }


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-3000:]
    except OSError:
        return ""


def report(result: dict[str, Any], machine: str) -> str:
    rates = result["rates"]
    ratio = rates["collector"]["per_s"] / rates["file"]["per_s"]
    lines = [
        f"collector load ({machine}): two services, {result['rate']:g} spans and "
        f"{result['rate']:g} logs a second each",
        f"rate: {rates['file']['per_s']:,.0f} spans/s to an OTLP/JSON file, "
        f"{rates['collector']['per_s']:,.0f} spans/s through the collector "
        f"({ratio:.2f}x; target at least 0.8x: {'met' if ratio >= 0.8 else 'missed'})",
        f"{'scenario':<32}{'written':>8}{'delivered':>10}{'counted lost':>13}{'twice':>7}"
        f"{'unaccounted':>12}{'peak MiB':>9}",
    ]
    for row in result["scenarios"]:
        peak = max((kib for _, kib, name in result["rss"] if name == row["name"]), default=0)
        counted = row["lost"] + row["dropped"] + row["failed"]
        lines.append(
            f"{row['name']:<32}{row['written']:>8,}{row['delivered']:>10,}{counted:>13,}"
            f"{row['twice']:>7,}{row['unaccounted']:>12,}{peak / 1024:>9.0f}"
        )
    ledgers = {row["name"]: row.get("ledger_unaccounted") for row in result["scenarios"]}
    off = {name: n for name, n in ledgers.items() if n}
    lines.append(
        "the readers' own delivery ledgers: "
        + (f"unaccounted {off}" if off else "0 unaccounted in each scenario")
    )
    for row in result["scenarios"]:
        if row.get("asked_again_after") is not None:
            lines.append(
                f"{row['name']}: asked again {row['asked_again_after']:.1f} s after the 429"
            )
    rss = [kib for _, kib, _ in result["rss"] if kib]
    if rss:
        lines.append(
            f"reader RSS over the run: first {rss[0] / 1024:.0f} MiB, peak "
            f"{max(rss) / 1024:.0f} MiB, last {rss[-1] / 1024:.0f} MiB"
        )
    return "\n".join(lines)


def plot(result: dict[str, Any], path: str) -> bool:
    try:
        import matplotlib  # noqa: PLC0415 - optional

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    figure, ax = plt.subplots(figsize=(12, 4.5), constrained_layout=True)
    xs = [t for t, _, _ in result["rss"]]
    ax.plot(xs, [kib / 1024 for _, kib, _ in result["rss"]], color="#4c72b0")
    names = [name for _, _, name in result["rss"]]
    for index, name in enumerate(names):
        if index == 0 or names[index - 1] != name:
            ax.axvline(xs[index], color="#9a9a9a", linewidth=0.6)
            ax.text(xs[index], 0, f" {name}", rotation=90, va="bottom", fontsize=7)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds")
    ax.set_ylabel("reader RSS, MiB (with its workers)")
    ax.set_title("otel-userevents record --exporter otlp_proto_http --spool, through faults")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20, help="spans (and logs) a second")
    parser.add_argument("--burst", type=int, default=20000, help="spans, for the rates")
    parser.add_argument("--buffer-size-kb", type=int, default=16384)
    parser.add_argument("--only", nargs="*", help="scenarios whose names start so")
    parser.add_argument("--json", metavar="FILE", help="also write the result here")
    parser.add_argument("--report", metavar="FILE", help="print and plot a result again")
    parser.add_argument("--plot", metavar="PNG")
    parser.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.in_guest:
        save_result("collector_load", in_guest(options))
        return 0
    if options.report:
        result, machine = json.loads(Path(options.report).read_text()), "again"
    else:
        args = ["--rate", str(options.rate), "--burst", str(options.burst),
                "--buffer-size-kb", str(options.buffer_size_kb)]  # fmt: skip
        if options.only:
            args += ["--only", *options.only]
        code, result, machine = run_in_guest("collector_load", args, timeout=5400)
        if code:
            return code
        if options.json:
            Path(options.json).write_text(json.dumps(result, indent=2))
    print(report(result, machine))
    if options.plot and not plot(result, options.plot):
        print("collector_load: no plot (matplotlib: pip install -e '.[bench]')", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
