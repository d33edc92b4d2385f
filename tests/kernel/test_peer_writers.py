# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader against writers and a decoder nobody here wrote (issue 33's "Done when"):
one ``record --prefix '*' --provider '*'`` started first; then, at once, one of our Python
apps and three C++ writers built with Microsoft's LinuxTracepoints (tests/support/peers/:
the Rust span layout, the .NET log layout in UTF-16 with arrays and env_properties, and an
``otlp_metrics`` writer as the Rust metrics exporter writes it). One OTLP/JSON output holds
them all as docs/common-schema.md says; ``perf record -k monotonic`` and ``trace-cmd
record`` of the same records decode to the same; and every EventHeader event decodes to
the fields LinuxTracepoints' ``perf-decode`` prints for that perf.data.

The writers register, wait for a go file, then write: the test starts perf (its events
disabled, enabled through its control fifo, which acknowledges) and trace-cmd once the
tracepoints exist, and says go once the reader, trace-cmd and perf all listen (a writer
that writes the moment it is enabled can beat perf's start). The reader is never helped:
it starts before any writer registers, and finds them as it finds any new service.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from opentelemetry_exporter_userevents.abi import USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.abi.format import EventFormat, parse_format
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.reader.capture.perf_data import read_perf_data
from opentelemetry_exporter_userevents.reader.decode.eventheader import (
    decode_event,
    eventheader_offset,
)
from tests.reader.decode.eventheader_json import JsonForm, errno_names, normal, same
from tests.support import linuxtracepoints, peer_otlp
from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten, metric_points

pytestmark = pytest.mark.kernel

COUNT = 8
"""Events each C++ span and log writer writes (every variant of its layout twice)."""
TAG = "p" + hashlib.blake2b(__name__.encode(), digest_size=5).hexdigest()
RUST = f"{TAG}Rust"
DOTNET = "MicrosoftOpenTelemetryLogs"  # the .NET exporter's one provider
METRICS_WAIT = 30
"""Seconds the test waits for the reader to hold ``otlp_metrics`` before it writes."""
SINGLE_FORMAT = {"OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT": "false"}  # perf cannot parse '.'
BOM = b"\xef\xbb\xbf"
WAIT = 180
"""Seconds for any one step (a bound on the test in an emulated guest, not a measure)."""


@dataclasses.dataclass
class Run:
    app: dict[str, Any]
    rust: list[dict[str, Any]]
    dotnet: list[dict[str, Any]]
    metrics: list[dict[str, Any]]
    output: Path
    summary: str
    perf_data: Path
    trace_dat: Path


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:  # .ci/run installs them: a run without them must not pass
        pytest.fail(f"{name} is not installed (Debian: apt-get install trace-cmd linux-perf)")
    return path


def _metric_requests(tmp: Path) -> tuple[list[Path], list[dict[str, Any]]]:
    """Two OTLP metric requests, as files for the writer and as OTLP/JSON."""
    paths, requests = [], []
    for number, (name, points) in enumerate([("orders.placed", 7), ("orders.placed", 9)]):
        request = ExportMetricsServiceRequest()
        resource = request.resource_metrics.add()
        service = resource.resource.attributes.add()
        service.key, service.value.string_value = "service.name", f"{TAG}-billing"
        scope = resource.scope_metrics.add()
        scope.scope.name = "billing.meter"
        metric = scope.metrics.add()
        metric.name, metric.unit = name, "{order}"
        metric.sum.is_monotonic = True
        metric.sum.aggregation_temporality = 2  # cumulative
        point = metric.sum.data_points.add()
        point.as_int = points
        point.start_time_unix_nano = 1_752_228_000_000_000_000
        point.time_unix_nano = 1_752_228_000_000_000_000 + (number + 1) * 10**9
        gauge = scope.metrics.add()
        gauge.name = "queue.depth"
        gauge.gauge.data_points.add(as_double=2.5 + number, time_unix_nano=point.time_unix_nano)
        path = tmp / f"metrics-{number}.pb"
        path.write_bytes(request.SerializeToString())
        paths.append(path)
        requests.append(json_format.MessageToDict(request, use_integers_for_enums=True))
    return paths, requests


def _start(command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=proc.ROOT,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    proc._RUNNING.append(process)  # reaped if the test fails first
    return process


def _lines(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


def _enabled(tracefs: Tracefs, name: str, instance: str | None = None) -> bool:
    where = Path(tracefs.path, *(("instances", instance) if instance else ()))
    try:
        return (where / "events" / USER_EVENTS_SYSTEM / name / "enable").read_text()[0] == "1"
    except OSError:
        return False


def _perf_enable(ctl: Path, ack: Path) -> None:
    """Enable perf's events (started disabled) through its control fifo; wait for its ack."""
    ctl_fd, ack_fd = os.open(ctl, os.O_RDWR), os.open(ack, os.O_RDWR)
    try:
        os.write(ctl_fd, b"enable\n")
        ready, _, _ = select.select([ack_fd], [], [], WAIT)
        assert ready and os.read(ack_fd, 16).startswith(b"ack"), "perf did not acknowledge"
    finally:
        os.close(ctl_fd)
        os.close(ack_fd)


def _ours_read(output: Path) -> tuple[int, int]:
    """Spans and logs of the test's services in the reader's output so far (a reader of
    every service may take others' too; a line being written is not read yet)."""
    text = output.read_text() if output.exists() else ""
    requests = [json.loads(line) for line in text.split("\n")[:-1]]
    services = {"checkout", "cart", "orders"}
    spans, logs = (
        [r for r, _ in peer_otlp.items(requests, kind) if r.get("service.name") in services]
        for kind in ("spans", "logs")
    )
    return len(spans), len(logs)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Everything at once, once for the module's tests (one guest boot runs them all)."""
    perf, trace_cmd = _tool("perf"), _tool("trace-cmd")
    writers = {name: str(linuxtracepoints.writer(name)) for name in linuxtracepoints.names()}
    tracefs = Tracefs.find()
    assert tracefs is not None
    tmp = tmp_path_factory.mktemp("peers")
    go = tmp / "go"
    buffers, requests = _metric_requests(tmp)

    reader, output = proc.reader(tmp, "--prefix", "*", "--provider", "*")
    instance = (tmp / "ready-0").read_text()
    waits = ["--go", str(go), "--wait-enabled"]
    app = proc.app(TAG, "checkout", "--wait-listened", "--go", str(go), env=SINGLE_FORMAT)
    proc._RUNNING.append(app)
    rust = _start([writers["rust_span_writer"], RUST, str(COUNT), "cart", "pod-7", *waits])
    dotnet = _start([writers["dotnet_log_writer"], DOTNET, str(COUNT), "orders", "vm-3", *waits])
    metrics = _start([writers["otlp_metrics_writer"], *map(str, buffers), *waits])

    def ours() -> list[str]:
        return [n for n in tracefs.events(USER_EVENTS_SYSTEM) if n.startswith(f"{TAG}_")]

    names = [f"{RUST}_L4K1", f"{DOTNET}_L4K1", "otlp_metrics"]
    assert wait_until(
        lambda: len(ours()) >= 7 and set(names) <= set(tracefs.events(USER_EVENTS_SYSTEM)), WAIT
    ), (ours(), tracefs.events(USER_EVENTS_SYSTEM))
    names += ours()
    events = [f"{USER_EVENTS_SYSTEM}:{name}" for name in names]
    trace_dat, perf_data = tmp / "trace.dat", tmp / "perf.data"
    tracing = proc.background(
        trace_cmd, "record", *(x for e in events for x in ("-e", e)), "-o", str(trace_dat)
    )
    ctl, ack = tmp / "perf-ctl", tmp / "perf-ack"
    os.mkfifo(ctl)
    os.mkfifo(ack)
    recording = proc.background(
        perf, "record", "-q", "-a", "-k", "monotonic", "-D", "-1",
        f"--control=fifo:{ctl},{ack}", *(x for e in events for x in ("-e", e)),
        "-o", str(perf_data),
    )  # fmt: skip
    _perf_enable(ctl, ack)
    spans_and_logs = [name for name in names if name != "otlp_metrics"]
    assert wait_until(
        lambda: (
            all(_enabled(tracefs, n) for n in names)
            and all(_enabled(tracefs, n, instance) for n in spans_and_logs)
        ),
        WAIT,
    ), [(n, _enabled(tracefs, n), _enabled(tracefs, n, instance)) for n in names]
    # a reader that takes otlp_metrics holds it by now too; one that does not fails the
    # metrics test only (the wait is not asserted: that test says what was missed)
    wait_until(lambda: _enabled(tracefs, "otlp_metrics", instance), METRICS_WAIT)
    go.touch()  # all listen: write

    result = proc.finished(app)
    rust_lines, dotnet_lines, metric_lines = _lines(rust), _lines(dotnet), _lines(metrics)
    assert (len(rust_lines), len(dotnet_lines), len(metric_lines)) == (COUNT, COUNT, 2)
    read = (6 + COUNT, 7 + COUNT)
    assert wait_until(lambda: _ours_read(output) == read, WAIT), _ours_read(output)
    proc.stop(recording, codes=(0, -signal.SIGINT))
    proc.stop(tracing, codes=(0, 2))  # 2: its reset after the app's tracepoints went
    summary = proc.stop(reader)
    return Run(result, rust_lines, dotnet_lines, requests, output, summary, perf_data, trace_dat)


def _assert_all_as_written(run: Run, spans: list[dict], logs: list[dict], err: str) -> None:
    """Our app's spans and logs as its SDK gave them; the C++ writers' as specified."""
    app_spans = flatten([run.app["spans"]], "spans")
    app_logs = flatten([run.app["logs"]], "logs")
    all_spans, all_logs = flatten(spans, "spans"), flatten(logs, "logs")
    assert {k: all_spans.get(k) for k in app_spans} == app_spans, err
    assert {k: all_logs.get(k) for k in app_logs} == app_logs, err

    got_spans = sorted(
        (peer_otlp.span_fields(resource, span) for resource, span in peer_otlp.items(spans, "spans")
         if resource.get("service.name") == "cart"),
        key=lambda span: span["spanId"],
    )  # fmt: skip
    want_spans = sorted(map(peer_otlp.rust_span, run.rust), key=lambda span: span["spanId"])
    assert len(got_spans) == COUNT, err
    for got, want in zip(got_spans, want_spans, strict=True):
        assert got == want
    got_logs = sorted(
        (peer_otlp.log_fields(resource, log) for resource, log in peer_otlp.items(logs, "logs")
         if resource.get("service.name") == "orders"),
        key=lambda log: log["time"],
    )  # fmt: skip
    want_logs = sorted(map(peer_otlp.dotnet_log, run.dotnet), key=lambda log: log["time"])
    assert len(got_logs) == COUNT, err
    for got, want in zip(got_logs, want_logs, strict=True):
        assert got == want


def _requests(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _decode(path: Path) -> tuple[list[dict[str, Any]], str]:
    done = proc.otel_userevents(
        "decode", str(path), "--prefix", "*", "--provider", "*", "-o", f"{path}.json"
    )
    assert done.returncode == 0, done.stderr
    return _requests(Path(f"{path}.json")), done.stderr


def _of(requests: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [request for request in requests if key in request]


def test_one_reader_rebuilds_our_app_and_the_rust_and_dotnet_writers_live(run: Run) -> None:
    requests = _requests(run.output)
    spans, logs = _of(requests, "resourceSpans"), _of(requests, "resourceLogs")
    _assert_all_as_written(run, spans, logs, run.summary)
    assert "lost 0" in run.summary and "invalid" not in run.summary, run.summary


@pytest.mark.parametrize("capture", ["perf_data", "trace_dat"])
def test_perf_and_trace_cmd_captures_of_them_decode_to_the_same(run: Run, capture: str) -> None:
    requests, err = _decode(getattr(run, capture))
    _assert_all_as_written(run, _of(requests, "resourceSpans"), _of(requests, "resourceLogs"), err)


def _our_eventheader_events(perf_data: Path, json_form: JsonForm) -> list[list[Any]]:
    perf = read_perf_data(perf_data.read_bytes())
    formats: dict[int, EventFormat] = {}
    for _system, text in perf.tracing.formats:
        try:
            fmt = parse_format(text)
        except ValueError:
            continue
        formats[fmt.id] = fmt
    found = []
    for order, sample in enumerate(perf.samples()):
        fmt = formats[int.from_bytes(sample.raw[:2], "little")]
        offset = eventheader_offset(fmt)
        if offset is not None:
            event = decode_event(fmt.name, sample.raw[offset:])
            found.append((sample.timestamp, order, json_form.event(event)))
    assert perf.stats.corrupt == 0
    return [event for _time, _order, event in sorted(found, key=lambda item: item[:2])]


def _without_sample_meta(event: list[Any]) -> list[Any]:
    """perf-decode's JSON of an event without what the sample, not the event, says."""
    return [
        [name, [p for p in value if p[0] not in {"time", "cpu", "pid", "tid"}]]
        if name == "meta" else [name, value]
        for name, value in event
    ]  # fmt: skip


def test_every_eventheader_event_decodes_to_what_perf_decode_prints(run: Run) -> None:
    decoded = run.perf_data.with_suffix(".perf-decode.json")
    done = subprocess.run(
        [str(linuxtracepoints.perf_decode()), "-o", str(decoded), str(run.perf_data)],
        capture_output=True, text=True, timeout=WAIT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = decoded.read_bytes()
    assert text.startswith(BOM)  # in a file, not a terminal
    # a whole document here (TestOutput's JSON, a member without the braces, is not)
    ((_path, events),) = json.loads(
        text.removeprefix(BOM).decode("utf-8", "surrogateescape"), object_pairs_hook=list
    )
    providers = (f"{RUST}:", f"{DOTNET}:")
    theirs = [
        _without_sample_meta(normal(event))
        for event in events
        if str(event[0][1]).startswith(providers)
    ]
    formatter = linuxtracepoints.source() / "libeventheader-decode-cpp/src/EventFormatter.cpp"
    ours = [
        event
        for event in _our_eventheader_events(run.perf_data, JsonForm(errno_names(formatter), False))
        if str(event[0][1]).startswith(providers)
    ]
    assert len(theirs) == 2 * COUNT, [event[0] for event in events][:40]
    differ = [(want, got) for want, got in zip(theirs, ours, strict=True) if not same(want, got)]
    assert not differ, json.dumps(differ[:3])


def test_otlp_metrics_are_rebuilt_live_and_from_both_captures(run: Run) -> None:
    """The metrics the ``otlp_metrics`` writer carried, through the live reader, the
    perf.data and the trace.dat alike."""
    want = metric_points(run.metrics)
    assert len(want) == 2
    for name, requests in [
        ("live", _requests(run.output)),
        ("perf.data", _decode(run.perf_data)[0]),
        ("trace.dat", _decode(run.trace_dat)[0]),
    ]:
        got = metric_points(_of(requests, "resourceMetrics"))
        mine = {key: points for key, points in got.items() if f"{TAG}-billing" in key}
        assert mine == want, (name, list(got))
