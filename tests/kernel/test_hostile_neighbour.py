# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A hostile neighbour on a real kernel. Any local process may register our tracepoints with
our exact formats and write what it likes into them; the reader runs as root and shows what
it read to an operator. Here a process that imports nothing of the package
(tests/support/hostile_writer.py: raw ioctl and writev) writes records that are well-formed
for the kernel and wrong for us, before and after a genuine app, while three readers record
at once: OTLP/JSON, the tree view, and a capture decoded afterwards.

Each reader must get through it: exit 0 with no traceback; the genuine app's spans and logs
exactly as its own SDK's OTLP encoding, with its own resource (the neighbour claimed its
resource id first); no raw terminal escape in any output; and the hostile records counted as
invalid in the summary. The whole scene runs once per guest boot (a module fixture), each
test checking one of these."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents._export.resource import ResourceAnnouncer
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.record.tracepoints import commands, tracepoint_kinds
from tests.support import hostile_writer
from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten, of_traces

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parent.parent.parent
SERVICE = "neighbour-app"
"""The genuine app's service.name (tests/support/short_app.py, resource below)."""
APP_RESOURCE = Resource({"service.name": SERVICE, "service.version": "1.0"})
FLOOD = (4000, 1000)
"""Distinct resources the neighbour announces before and after the app."""
RAW_ESCAPES = (b"\x1b", b"\xc2\x9b")
"""ESC and the UTF-8 of U+009B (C1 CSI). JSON output escapes ESC as \\u001b, which is fine:
what no output may carry is the raw byte a terminal acts on."""
READERS = {
    "otlp-json": (),
    "tree": ("--format", "tree"),
    "capture": ("--capture",),
}


@dataclass
class Ended:
    returncode: int
    stdout: bytes
    stderr: bytes


@dataclass
class Scene:
    readers: dict[str, Ended]
    decode: Ended
    outputs: dict[str, bytes]
    """``otlp-json``, ``tree`` and ``decode``: what each wrote to its output file."""
    app: dict
    """The app's own OTLP/JSON of what its SDK handed to the exporters."""
    app_pid: int
    hostile_pids: list[int]
    seconds: dict[str, float]
    """When each step ended, from the readers' start."""


def _start(tmp_path: Path, label: str, prefix: str) -> tuple[subprocess.Popen[bytes], Path]:
    """``otel-userevents record`` of ``prefix``, not waited for (three start at once)."""
    out = tmp_path / f"{label}.out"
    args = READERS[label]
    if args == ("--capture",):
        args = ("--capture", str(tmp_path / "cap.dat"))
    else:
        args = (*args, "-o", str(out))
    process = subprocess.Popen(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
         "--prefix", prefix, "--ready-file", str(tmp_path / f"{label}.ready"),
         "--resource-wait", "2", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    return process, out


def _hostile(tmp_path: Path, config: dict, phase: str, app_rid: int, flood: int) -> int:
    """Run the neighbour once; its pid."""
    path = tmp_path / f"hostile-{phase}.json"
    path.write_text(json.dumps({**config, "phase": phase, "app_resource_id": app_rid,
                                "flood": flood}))  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "hostile_writer.py"), str(path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    expected = len(hostile_writer.hostile_records(phase, app_rid, flood))
    assert report["refused"] == {} and report["written"] == expected, report
    return int(report["pid"])


def _config(tracefs: Tracefs, prefix: str, multi_format: bool) -> dict:
    """What the neighbour registers: our exact commands, in the app's layout."""
    kinds = tracepoint_kinds(prefix)
    return {
        "user_events_data": os.path.join(tracefs.path, "user_events_data"),
        "layout": "multi" if multi_format else "single",
        "commands": {
            key: list(commands(f"{prefix}_{key}", kinds[f"{prefix}_{key}"][1]))
            for key in hostile_writer.KEYS
        },
    }


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, kernel_has_multi_format: bool) -> Scene:
    tracefs = Tracefs.find()
    assert tracefs is not None, "tracefs not found"
    prefix = "p" + hashlib.blake2b(__name__.encode(), digest_size=6).hexdigest()
    tmp_path = tmp_path_factory.mktemp("hostile")
    started = time.monotonic()
    seconds: dict[str, float] = {}

    def step(name: str) -> None:
        seconds[name] = round(time.monotonic() - started, 1)

    readers = {label: _start(tmp_path, label, prefix) for label in READERS}
    try:
        for label, (process, _) in readers.items():
            ready = tmp_path / f"{label}.ready"
            if not wait_until(lambda r=ready, p=process: r.exists() or p.poll() is not None, 120):
                _fail(f"the {label} reader was not ready in 120 s")
            if process.poll() is not None:
                _, err = process.communicate()
                _fail(f"the {label} reader exited {process.returncode}:\n{_text(err[-3000:])}")
            assert wait_until(lambda r=ready: bool(r.read_text()), 10), label
        step("readers ready")
        config = _config(tracefs, prefix, kernel_has_multi_format)
        app_rid = ResourceAnnouncer(None, None, 10_000).resource_id(APP_RESOURCE)  # type: ignore[arg-type]
        hostile_pids = [_hostile(tmp_path, config, "before", app_rid, FLOOD[0])]
        step("hostile before")
        app = proc.app(prefix, SERVICE)  # no waiting: the readers hold the tracepoints
        result = proc.finished(app)
        step("app")
        hostile_pids.append(_hostile(tmp_path, config, "after", app_rid, FLOOD[1]))
        step("hostile after")
        for process, _ in readers.values():
            process.send_signal(signal.SIGINT)
        ended = {}
        for label, (process, _) in readers.items():
            out, err = process.communicate(timeout=300)
            ended[label] = Ended(process.returncode, out, err)
        step("readers stopped")
    finally:
        for process, _ in readers.values():
            if process.poll() is None:
                process.kill()
                process.communicate()
    decoded_path = tmp_path / "decode.out"
    done = subprocess.run(
        [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "decode",
         str(tmp_path / "cap.dat"), "-o", str(decoded_path)],
        capture_output=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    step("decoded")
    sys.stderr.write(f"hostile neighbour scene, seconds after the readers' start: {seconds}\n")
    for label, err in [*((k, v.stderr) for k, v in ended.items()), ("decode", done.stderr)]:
        sys.stderr.write(f"{label}: {_summary(err)}\n")
    outputs = {label: out.read_bytes() for label, (_, out) in readers.items() if out.exists()}
    outputs["decode"] = decoded_path.read_bytes() if decoded_path.exists() else b""
    return Scene(
        readers=ended,
        decode=Ended(done.returncode, done.stdout, done.stderr),
        outputs=outputs,
        app=result,
        app_pid=app.pid,
        hostile_pids=hostile_pids,
        seconds=seconds,
    )


def _ended(scene: Scene) -> dict[str, Ended]:
    return {**scene.readers, "decode": scene.decode}


def _requests(output: bytes) -> tuple[list[dict], list[dict]]:
    lines = [json.loads(line) for line in output.decode("utf-8").splitlines()]
    return [x for x in lines if "resourceSpans" in x], [x for x in lines if "resourceLogs" in x]


def _trace_ids(app: dict) -> set[str]:
    """The app's trace ids (its logs are written inside its spans)."""
    return {
        span["traceId"]
        for resource in app["spans"]["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    }


def _assert_the_apps_own(scene: Scene, output: bytes, err: bytes) -> None:
    want_spans = flatten([scene.app["spans"]], "spans")
    want_logs = flatten([scene.app["logs"]], "logs")
    assert len(want_spans) == 6 and len(want_logs) == 7
    assert scene.app["spans"]["resourceSpans"][0]["resource"]["attributes"] == [
        {"key": "service.name", "value": {"stringValue": SERVICE}},
        {"key": "service.version", "value": {"stringValue": "1.0"}},
    ], "the neighbour claimed the id of APP_RESOURCE: it must be the app's resource"
    spans, logs = _requests(output)
    trace_ids = _trace_ids(scene.app)
    _compare("spans", flatten(of_traces(spans, trace_ids), "spans"), want_spans, err)
    _compare("logs", flatten(of_traces(logs, trace_ids), "logs"), want_logs, err)


def _compare(kind: str, got: dict[str, str], want: dict[str, str], err: bytes) -> None:
    """The app's items as written (flatten's JSON texts) against its own, the first
    difference shown in full."""
    if got == want:
        return
    missing = [k for k in want if k not in got]
    differing = [k for k in want if k in got and got[k] != want[k]]
    lines = [f"the app's {kind}: {len(missing)} of {len(want)} missing, {len(differing)} "
             f"differ, {len(set(got) - set(want))} extra"]  # fmt: skip
    for k in differing[:1]:
        lines += [f"got:  {got[k]}", f"want: {want[k]}"]
    _fail("\n".join([*lines, _summary(err)]))


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _summary(err: bytes) -> str:
    """The summary line a command ends with (its stderr's last line)."""
    lines = _text(err).strip().splitlines()
    return lines[-1] if lines else "(no stderr)"


def _invalid(err: bytes) -> int:
    """The summary's count of invalid records (``N invalid`` or ``N invalid (...)``)."""
    return sum(int(n) for n in re.findall(rb"(\d+) invalid\b", err))


def _invalid_by_pid(err: bytes) -> dict[int, int]:
    """``by writer pid P: n, P: n``, when the summary says it."""
    named = re.search(rb"by writer pid ((?:\d+: \d+(?:, )?)+)", err)
    return {int(p): int(n) for p, n in re.findall(rb"(\d+): (\d+)", named[1])} if named else {}


def _fail(message: str) -> None:
    """A failure with its whole message (assert's is cut short without -vv)."""
    pytest.fail(message, pytrace=False)


def test_every_reader_and_decode_exit_0_without_a_traceback(scene):
    for label, ended in _ended(scene).items():
        if ended.returncode != 0 or b"Traceback" in ended.stderr:
            _fail(f"{label} exited {ended.returncode}:\n{_text(ended.stderr[-3000:])}")


def test_the_apps_spans_and_logs_come_back_exact_in_otlp_json(scene):
    _assert_the_apps_own(scene, scene.outputs["otlp-json"], scene.readers["otlp-json"].stderr)


def test_the_apps_spans_and_logs_come_back_exact_from_the_capture(scene):
    _assert_the_apps_own(scene, scene.outputs["decode"], scene.decode.stderr)


def test_the_tree_shows_the_apps_spans(scene):
    tree = scene.outputs["tree"].decode("utf-8", "replace")
    names = {"job"} | {f"item {n}" for n in range(5)}
    for name in names:
        if not re.search(rf"(^|  |─ ){re.escape(name)}  internal  ", tree, re.M):
            _fail(f"no span {name!r} in the tree:\n{tree[-3000:]}")
    app_traces = [line for line in tree.splitlines() if line.startswith("trace ")]
    assert any(line.endswith(f"  {SERVICE}") for line in app_traces), app_traces


def test_no_output_carries_a_raw_terminal_escape(scene):
    texts = {f"{label} output": data for label, data in scene.outputs.items()}
    for label, ended in _ended(scene).items():
        texts[f"{label} stdout"], texts[f"{label} stderr"] = ended.stdout, ended.stderr
    found = []
    for label, data in texts.items():
        for escape in RAW_ESCAPES:
            at = data.find(escape)
            if at >= 0:
                found.append(f"{label}: {data.count(escape)} x {escape!r}, first in "
                             f"{data[max(at - 80, 0) : at + 80]!r}")  # fmt: skip
    if found:
        _fail("raw terminal escapes:\n" + "\n".join(found))


def test_the_summaries_count_the_hostile_records_as_invalid(scene):
    """``N invalid (reason: n, ...; by writer pid P: n, ...)``: both runs of the neighbour
    named, the app never."""
    for label in ("otlp-json", "tree", "decode"):
        err = _ended(scene)[label].stderr
        if _invalid(err) <= 0:
            _fail(f"{label} counted no invalid record: {_summary(err)}")
        by_pid = _invalid_by_pid(err)
        if not (set(scene.hostile_pids) <= set(by_pid) and scene.app_pid not in by_pid):
            _fail(
                f"{label}: invalid records by pid {by_pid}, the neighbour was "
                f"{scene.hostile_pids} and the app {scene.app_pid}: {_summary(err)}"
            )
    for label in READERS:
        err = scene.readers[label].stderr
        if b"lost 0" not in err:
            _fail(f"{label} lost records: {_summary(err)}")
