# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The documentation's samples of program output, made from real runs so that they cannot
drift: README.rst's, and those of the reference its sections moved to (:data:`DOCUMENTS`).

In each of them, a comment ``.. sample: NAME`` (maybe followed by words for whoever edits the
file) marks the next literal block (a ``code-block``
or a paragraph's ``::`` block) as the output of sample NAME below. From the checkout's root::

    .venv/bin/python -m testbed.readme_samples          # runs each sample, shows what differs
    .venv/bin/python -m testbed.readme_samples --write  # runs each sample, rewrites its block

as root on a kernel with user_events; elsewhere with ``USER_EVENTS_KERNEL`` set, the runs
are made in the test bed (whose file system is read-only: the samples come back in a file
of its shared directory) and README.rst is rewritten here. :func:`differences` compares
after :func:`normalise`, which blanks only what changes from run to run (ids, times,
durations, counts of records that depend on timing, paths, the kernel's figures);
tests/kernel/test_drop_in.py runs it.
"""

from __future__ import annotations

import difflib
import glob
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from testbed.guest import KERNEL_ENV, run, unavailable_reason

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.rst"
DOCUMENTS = (README, ROOT / "docs" / "reader.rst")
"""The files that mark samples: the quick start's and the trace_pipe one in the README, the
reader's ready line and kernel view in the reader's reference."""
SHOWN_CHECKOUT = "/src/opentelemetry-exporter-userevents"
"""Where the README's samples say the checkout is (code.file.path), not this machine's path."""
SAMPLES = ("quick-start", "trace-pipe", "ready-line", "kernel-view")
"""The samples :func:`run_all` makes, each marked once in the :data:`DOCUMENTS`."""


def documented() -> str:
    """The :data:`DOCUMENTS` as one text: each sample is marked once in it."""
    return "\n".join(path.read_text() for path in DOCUMENTS)


TRACEFS = "/sys/kernel/tracing"
_MARK = re.compile(r"^(\s*)\.\. sample: ([\w-]+)(\s.*)?$")
_SUCCESSFUL_CART_SPAN = re.compile(r"status_code=\(0\) .* name=GET /cart/\{id\} ")
_OPENING = re.compile(r"^\s*\.\. code-block::|.*::\s*$")

_RULES: list[tuple[str, str]] = [
    (
        r"^\S+-\d+ +\[\d+\] \S+ +\d+\.\d+: otel_span\S*:",
        "<task>-<pid> [<cpu>] <flags> <time>: otel_span<id>:",
    ),
    (r"(_ns|resource_id)=0x[0-9a-f]+ \(-?\d+\)", r"\1=<n>"),  # resource_id is signed
    (r"\"time_ns\":\d+", '"time_ns":<n>'),
    (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", "<time>"),
    (r"\b[0-9a-f]{32}\b", "<trace-id>"),
    (r"\b[0-9a-f]{16}\b", "<span-id>"),
    (r"\d+(\.\d+)? (ms|µs|ns|s)\b", "<duration>"),
    (r"code\.file\.path=\S+", "code.file.path=<path>"),
    (r"/cart/\d+", "/cart/<n>"),
    (r"items=\d+", "items=<n>"),
    (r"\"items\":\d+", '"items":<n>'),
    (r"tracefs instance [\w.-]+", "tracefs instance <instance>"),
    (r"\d+ records in <duration> \([\d.]+/s\)", "<n> records in <duration> (<rate>)"),
    (r"from (\w+) \(\d+\)", r"from \1 (<n>)"),
    (r"\d+ kernel events", "<n> kernel events"),
    (r"\d+ of \d+ clock checks", "<n> of <n> clock checks"),
    (r", the worst <duration> outside", ""),
    (r"; clocksource \w+( \(coarse[^)]*\))?", "; clocksource <clocksource>"),
    (r"^(\s*)⚙ .*", r"\1⚙ <the kernel's figures>"),
]
"""What legitimately varies between runs, in order, as (pattern, replacement)."""


def normalise(lines: list[str]) -> list[str]:
    """``lines`` with each rule of ``_RULES`` applied, and without the kernel view's off-CPU
    intervals (``◦``): how many a span has, and where they fall among its events, is the
    scheduler's."""
    out: list[str] = []
    for line in lines:
        if not line.lstrip().startswith("◦ "):
            for pattern, replacement in _RULES:
                line = re.sub(pattern, replacement, line)
            out.append(line)
    return out


def blocks(text: str) -> dict[str, tuple[int, int, str]]:
    """Each marked block: name -> (first line, end line, indentation) of its body in
    ``text``'s lines. A name marked twice, or a mark with no literal block, is an error."""
    lines = text.splitlines()
    found: dict[str, tuple[int, int, str]] = {}
    for n, line in enumerate(lines):
        mark = _MARK.match(line)
        if not mark:
            continue
        name = mark.group(2)
        assert name not in found, f"README.rst marks sample {name!r} twice"
        opening = next((m for m in range(n + 1, len(lines)) if _OPENING.match(lines[m])), None)
        assert opening is not None, f"sample {name!r} is marked before no literal block"
        indent = len(lines[opening]) - len(lines[opening].lstrip())
        first = opening + 1
        while first < len(lines) and not lines[first].strip():
            first += 1
        end = first
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
        ):
            end += 1
        while end > first and not lines[end - 1].strip():
            end -= 1
        body = lines[first]
        found[name] = (first, end, body[: len(body) - len(body.lstrip())])
    return found


def shown(text: str, name: str) -> list[str]:
    """The lines of sample ``name`` as README.rst ``text`` shows them, unindented."""
    first, end, indent = blocks(text)[name]
    return [line[len(indent) :] for line in text.splitlines()[first:end]]


def differences(text: str, fresh: dict[str, list[str]]) -> dict[str, str]:
    """For each sample whose normalised block in ``text`` differs from its normalised
    ``fresh`` output, a unified diff; also each sample not marked, or marked and unknown."""
    marked = blocks(text)
    found = {}
    for name in sorted(set(marked) | set(fresh)):
        if name not in marked or name not in fresh:
            found[name] = "marked in README.rst but not made" if name in marked else "not marked"
            continue
        old, new = normalise(shown(text, name)), normalise(fresh[name])
        if old != new:
            found[name] = "\n".join(
                difflib.unified_diff(old, new, "README.rst", "fresh", lineterm="")
            )
    return found


def rewrite(text: str, fresh: dict[str, list[str]]) -> str:
    """``text`` with each marked block's body replaced by its sample's fresh lines."""
    lines = text.splitlines()
    for _name, (first, end, indent) in sorted(blocks(text).items(), key=lambda b: -b[1][0]):
        lines[first:end] = [(indent + line).rstrip() for line in fresh[_name]]
    return "\n".join(lines) + "\n"


def _run(*args: str) -> tuple[list[str], list[str]]:
    """Run a command of the checkout, bounded; its stdout and stderr lines."""
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{args} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout.replace(str(ROOT), SHOWN_CHECKOUT).splitlines(), done.stderr.splitlines()


def _request(out: list[str], number: int) -> list[str]:
    """The log line and the trace tree of examples/app.py's request ``number``."""
    log = [line for line in out if f" checkout {number} done " in line]
    start = next(n for n, line in enumerate(out) if line.endswith(f"url.path=/cart/{number}")) - 1
    end = next((n for n in range(start + 1, len(out)) if not out[n].startswith(" ")), len(out))
    return log + out[start:end]


def record_app(kernel: bool) -> dict[str, list[str]]:
    """The quick start's run of examples/record_app.py, or with ``--kernel``: its kernel
    view sample and the ready line of a machine-wide reader."""
    out, err = _run(sys.executable, "examples/record_app.py", *(["--kernel"] if kernel else []))
    if not kernel:
        return {"quick-start": [out[0], *_request(out, 0), "...", *err]}
    view = [line for line in err if line.startswith("otel-userevents: kernel view")]
    ready = [line for line in err if "recording every prefix" in line]
    return {"kernel-view": _request(out, 0)[1:] + view, "ready-line": ready}


def _events() -> list[str]:
    return glob.glob(f"{TRACEFS}/events/user_events*/otel_*/enable")


def _enable(value: str) -> None:
    for name in _events():
        try:
            Path(name).write_text(value)
        except OSError:
            pass  # its last writer is gone


def trace_pipe() -> dict[str, list[str]]:
    """README's "Watch them" recipe: examples/app.py's tracepoints enabled, ``trace_pipe``
    read up to a successful ``GET /cart/{id}`` span (one in four fails: which comes first
    depends on when the pipe opens), and everything disabled again."""
    _wait(lambda: not _events(), "an earlier app's tracepoints to go")
    app = subprocess.Popen(
        [sys.executable, "examples/app.py", "--count", "1000"], cwd=ROOT, start_new_session=True
    )
    span: list[str] = []
    try:
        _wait(lambda: bool(glob.glob(f"{TRACEFS}/events/user_events*/otel_log_fatal*")), "app")
        _enable("1")
        Path(f"{TRACEFS}/tracing_on").write_text("1")
        pipe = open(f"{TRACEFS}/trace_pipe")  # noqa: SIM115 - closed by the reading thread

        def read() -> None:
            with pipe:
                for line in pipe:
                    if " otel_span" in line and _SUCCESSFUL_CART_SPAN.search(line):
                        span.append(line.strip())
                        return

        reading = threading.Thread(target=read, daemon=True)
        reading.start()
        reading.join(timeout=120)
        if not span:
            raise RuntimeError("no span came through trace_pipe in 120 s")
    finally:
        _enable("0")
        os.killpg(app.pid, signal.SIGTERM)
        app.wait(timeout=60)
    return {"trace-pipe": span}


def _wait(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.1)


def run_all() -> dict[str, list[str]]:
    """Every sample's fresh output, by name."""
    return {**record_app(False), **record_app(True), **trace_pipe()}


def in_the_test_bed() -> dict[str, list[str]]:
    """:func:`run_all` in a guest booted on ``USER_EVENTS_KERNEL``."""
    kernel = os.environ.get(KERNEL_ENV)
    reason = unavailable_reason(kernel)
    if reason or kernel is None:
        raise SystemExit(f"no user_events here, and no test bed: {reason}")
    saved: dict[str, list[str]] = {}

    def keep(share: Path) -> None:
        if (share / "samples.json").is_file():
            saved.update(json.loads((share / "samples.json").read_text()))

    done = run(kernel, [sys.executable, "-m", "testbed.readme_samples", "--save"], cwd=ROOT,
               timeout=1800, keep=keep)  # fmt: skip
    if done.returncode != 0 or not saved:
        raise SystemExit(f"the samples' runs failed in the test bed:\n{done.output[-4000:]}")
    return saved


def main(argv: list[str]) -> int:
    here = os.geteuid() == 0 and os.path.exists(f"{TRACEFS}/user_events_data")
    fresh = run_all() if here else in_the_test_bed()
    if "--save" in argv:  # in the test bed, for the host
        Path(os.environ["TESTBED_SHARE"], "samples.json").write_text(json.dumps(fresh))
        return 0
    text = documented()
    if "--write" in argv:
        for path in DOCUMENTS:
            path.write_text(rewrite(path.read_text(), fresh))
        return 0
    found = differences(text, fresh)
    for name, diff in found.items():
        print(f"sample {name}: {diff}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
