# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``decode --kernel`` on the host: a trace.dat with the scheduler's and syscalls' records
(Linux 6.12's formats, saved from the test bed) beside a span gives the span its figures
on the spans' clock; what the capture lacks (a group, a CPU's start, a cut CPU, a loss)
makes the span partial, said once; hostile formats and records are refused or counted,
never an exception (the kernel test proves the figures with trace-cmd and perf)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.capture import TraceDatWriter
from opentelemetry_exporter_userevents.reader.capture.decode import decode_bytes
from opentelemetry_exporter_userevents.reader.capture.trace_dat import clock_name, read_trace_dat
from opentelemetry_exporter_userevents.reader.capture.tracing_data import write_tracing_data
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats
from opentelemetry_exporter_userevents.reader.views import kernel_capture
from opentelemetry_exporter_userevents.reader.views.kernel_capture import CaptureKernelEvents
from opentelemetry_exporter_userevents.record import schema
from tests.reader.capture.test_capture import (
    FORMATS,
    RESOURCE_ID,
    SPAN_ID,
    _resource_payload,
)
from tests.support.captures import HEADER_EVENT, perf_data, tracing_data
from tests.support.otlp import attribute_value
from tests.support.pages import HEADER_PAGE, data_event, page, record
from tests.support.span_fixtures import RESOURCE

DATA = Path(__file__).resolve().parents[2] / "data"
KERNEL = json.loads((DATA / "kernel_formats_6_12.json").read_text())
MS = 1_000_000
SECOND = 1_000_000_000
OFFSET = 7_000 * 1_000_000_000  # the capture's clock minus CLOCK_REALTIME
S = 1_700_000_000 * 1_000_000_000  # the span's start (CLOCK_REALTIME)
E = S + 20 * MS
T = 77  # the span's thread


def _kernel_formats(*keys: str) -> list[tuple[str, str]]:
    return [(key.split("/")[0], KERNEL[key]) for key in keys or KERNEL]


def _kernel(key: str, common_pid: int = T, **values: int) -> bytes:
    fmt = parse_format(KERNEL[key])
    raw = bytearray(max([16] + [f.offset + f.size for f in fmt.fields]))
    struct.pack_into("<Hxxi", raw, 0, fmt.id, common_pid)
    for name, value in values.items():
        f = fmt.field(name)
        struct.pack_into("<" + {4: "i", 8: "q"}[f.size], raw, f.offset, value)
    return bytes(raw)


def _span_record() -> bytes:
    context = SpanContext(0x1234, 0x99, is_remote=False, trace_flags=TraceFlags(1))
    span = ReadableSpan("work", context, resource=RESOURCE, start_time=S, end_time=E)
    rid, _ = _resource_payload()
    return record(SPAN_ID, encode_span(span, rid, FTRACE_MAX_PAYLOAD)[0], pid=T)


def _events(delay: int = 0) -> list[tuple[int, int, bytes]]:
    """(cpu, span-clock time, record): T runs, preads for 1 ms, sleeps 4 ms, runs on;
    its span's record ``delay`` after the span's end. CPU 1 has begun before the span."""
    _, resource = _resource_payload()
    return [
        (1, S - 3 * MS, _kernel("sched/sched_switch", 0, prev_pid=0, prev_state=0, next_pid=5)),
        (0, S - 2 * MS, record(RESOURCE_ID, resource, pid=T)),
        (0, S - 1 * MS, _kernel("sched/sched_switch", 0, prev_pid=0, prev_state=0, next_pid=T)),
        (0, S + 2 * MS, _kernel("syscalls/sys_enter_pread64")),
        (0, S + 3 * MS, _kernel("syscalls/sys_exit_pread64")),
        (0, S + 4 * MS, _kernel("sched/sched_switch", T, prev_pid=T, prev_state=1, next_pid=0)),
        (1, S + 7 * MS, _kernel("sched/sched_wakeup", 5, pid=T)),
        (0, S + 8 * MS, _kernel("sched/sched_switch", 0, prev_pid=0, prev_state=0, next_pid=T)),
        (0, E + delay, _span_record()),
    ]


def _trace_dat(tmp_path: Path, events, formats=None, missed_at: int | None = None) -> str:
    """One record a page, times on the capture's clock (span clock + OFFSET)."""
    path = str(tmp_path / "kernel.dat")
    writer = TraceDatWriter(path, 4096, HEADER_PAGE, HEADER_EVENT)
    for number, (cpu, when, raw) in enumerate(events):
        writer.add_page(cpu, page(when + OFFSET, [data_event(0, raw)],
                                  missed_flag=number == missed_at))  # fmt: skip
    for system, text in FORMATS + (_kernel_formats() if formats is None else formats):
        writer.add_format(system, text)
    writer.close()
    return path


def _decode(path: str, capsys) -> tuple[dict[str, Any], str]:
    out = Path(path + ".json")
    code = cli.main(["decode", path, "--kernel", "sched,syscalls", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    requests = [line["resourceSpans"] for line in lines if "resourceSpans" in line]
    spans = [s for r in requests for rs in r for sc in rs["scopeSpans"] for s in sc["spans"]]
    assert len(spans) == 1, lines
    got = {a["key"]: attribute_value(a["value"]) for a in spans[0]["attributes"]}
    got["off_cpu_at"] = [int(e["timeUnixNano"]) for e in spans[0].get("events", [])]
    return got, err


def test_a_span_gets_its_threads_figures_from_the_capture_on_the_spans_clock(tmp_path, capsys):
    got, err = _decode(_trace_dat(tmp_path, _events()), capsys)

    assert got["linux.kernel.view"] == "whole", (got, err)
    assert got["linux.thread.id"] == T
    assert got["linux.sched.on_cpu_ns"] == 16 * MS  # [S, S+4ms] and [S+8ms, E]
    assert got["linux.sched.sleeping_ns"] == 3 * MS and got["linux.sched.runnable_ns"] == MS
    assert got["linux.sched.switches.voluntary"] == 1
    assert got["linux.syscall.top.name"] == ["pread64"]
    assert got["linux.syscall.top.time_ns"] == [MS]
    assert got["off_cpu_at"] == [S + 4 * MS]  # the sleep, a span event at its start
    assert "trace clock unknown, estimated from 1 spans of 1 threads" in err, err
    assert "kernel view of 1 spans (0 partial" in err, err


def test_the_estimate_maps_kernel_times_early_by_the_least_export_delay(tmp_path, capsys):
    delay = 40_000
    got, _ = _decode(_trace_dat(tmp_path, _events(delay)), capsys)
    # the stamp of the span's record is its end plus the delay, and the estimate takes
    # the delay for part of the offset: every kernel time is mapped that much early
    assert got["off_cpu_at"] == [S + 4 * MS - delay]
    assert got["linux.sched.on_cpu_ns"] == 16 * MS
    assert got["linux.kernel.view"] == "whole"


def test_a_capture_without_the_syscalls_events_makes_spans_partial_said_once(tmp_path, capsys):
    events = _events()
    sched = _kernel_formats("sched/sched_switch", "sched/sched_wakeup", "sched/sched_wakeup_new",
                            "sched/sched_process_fork", "sched/sched_process_exit")  # fmt: skip
    got, err = _decode(_trace_dat(tmp_path, events, sched), capsys)

    assert got["linux.kernel.view"] == "partial"
    assert got["linux.sched.sleeping_ns"] == 3 * MS  # what the capture has is still there
    assert err.count("no syscalls events in the capture") == 1, err
    assert "1 spans partial: no syscalls events in the capture" in err


def test_a_cpu_whose_records_begin_after_the_span_started_makes_it_partial(tmp_path, capsys):
    events = _events()
    cpu1 = _kernel("sched/sched_switch", 0, prev_pid=0, prev_state=0, next_pid=5)
    events[0] = (1, S + 1 * MS, cpu1)  # CPU 1's first record: inside the span
    got, err = _decode(_trace_dat(tmp_path, sorted(events, key=lambda e: e[1])), capsys)

    assert got["linux.kernel.view"] == "partial"
    assert "1 spans partial: started before every CPU's records had begun" in err, err


def test_a_cpu_cut_short_makes_spans_partial(tmp_path, capsys):
    events = _events()
    events.append((2, E + MS, _kernel("sched/sched_switch", 0, prev_pid=0, prev_state=0,
                                      next_pid=5)))  # fmt: skip
    path = _trace_dat(tmp_path, events)
    with open(path, "r+b") as f:
        f.truncate(f.seek(0, 2) - 100)  # CPU 2's page is the last in the file
    got, err = _decode(path, capsys)

    assert got["linux.kernel.view"] == "partial"
    assert "1 spans partial: CPU 2's data is cut short" in err, err


def test_a_page_after_lost_events_makes_the_spans_over_the_loss_partial(tmp_path, capsys):
    got, err = _decode(_trace_dat(tmp_path, _events(), missed_at=3), capsys)  # the enter

    assert got["linux.kernel.view"] == "partial"
    assert "1 spans partial: events lost meanwhile" in err, err


def test_hostile_formats_are_refused_and_named(tmp_path, capsys):
    field = "pid_t prev_pid;\toffset:24;\tsize:"
    switch = KERNEL["sched/sched_switch"].replace(field + "4;", field + "3;")
    assert switch != KERNEL["sched/sched_switch"]
    stolen = KERNEL["sched/sched_wakeup"].replace(
        f"ID: {parse_format(KERNEL['sched/sched_wakeup']).id}", f"ID: {SPAN_ID}"
    )
    formats = [("sched", switch), ("sched", stolen)] + _kernel_formats(
        "syscalls/sys_enter_pread64", "syscalls/sys_exit_pread64", "sched/sched_wakeup_new"
    )
    got, err = _decode(_trace_dat(tmp_path, _events(), formats), capsys)

    assert "not reading sched/sched_switch: sched_switch.prev_pid: an integer of 3 bytes" in err
    assert f"not reading event id {SPAN_ID}: one of our tracepoints has it" in err, err
    assert got["linux.kernel.view"] in ("whole", "partial")  # the span itself is read


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(sorted(KERNEL)), st.binary(max_size=64),
                          st.integers(-(2**31), 2**31 - 1)), max_size=30))  # fmt: skip
def test_hostile_kernel_records_are_counted_never_raised(items):
    events = CaptureKernelEvents(_kernel_formats())
    fed = []
    for stamp, (key, tail, pid) in enumerate(items):
        head = struct.pack("<Hxxi", parse_format(KERNEL[key]).id, pid)
        fed.append((stamp, 0, memoryview(head + tail), pid))
    events.take(fed)
    assert events.stats.records + events.stats.undecodable == len(fed)


def test_a_thread_of_another_process_is_refused_as_linux_thread_id():
    """trace.dat does not say which process a thread is in: each is its own; perf's
    samples do."""
    events = CaptureKernelEvents(_kernel_formats())
    switch = _kernel("sched/sched_switch", 0, prev_pid=0, prev_state=0, next_pid=T)
    other = _kernel("sched/sched_switch", 0, prev_pid=T, prev_state=0, next_pid=T + 1)
    events.take([(1, 0, memoryview(switch), -1), (2, 0, memoryview(other), -1)])
    assert events.process_of(T) != events.process_of(T + 1)
    own = _kernel("syscalls/sys_enter_pread64", T + 1)
    events.take([(3, 0, memoryview(own), 500), (4, 0, memoryview(_kernel(
        "syscalls/sys_enter_pread64", T)), 500)])  # fmt: skip
    assert events.process_of(T) == events.process_of(T + 1)
    assert events.process_of(12345) is None  # never seen: not watched


def test_the_schema_span_end_time_field_is_what_the_estimate_reads():
    assert "end_time_ns" in [field.name for field in schema.SPAN.fields]


# --- perf.data ----------------------------------------------------------------------------

P = 500  # the process of T and T2, as perf's samples say
T2 = T + 1


def _perf_sample(raw: bytes, when: int, pid: int, tid: int, cpu: int = 0) -> bytes:
    body = struct.pack("<QIIQIIQ", 0, pid, tid, when, cpu, 0, 1)
    padded = raw + bytes(-(len(raw) + 4) % 8)
    body += struct.pack("<I", len(padded)) + padded
    return struct.pack("<IHH", 9, 2, 8 + len(body)) + body


def _perf_data(records: list[bytes], clock: tuple[int, int, int] | None = None) -> bytes:
    """A perf.data as tests.support.captures lays one out, with ``perf record -k``'s
    HEADER_CLOCKID and HEADER_CLOCK_DATA sections (clockid, wall ns, clock ns) if given."""
    formats = FORMATS + _kernel_formats()
    plain = perf_data(formats, records)
    header = bytearray(plain[:104])
    data_offset, data_size = struct.unpack_from("<QQ", header, 40)
    end = data_offset + data_size
    tracing = write_tracing_data(tracing_data(formats))
    bodies = [tracing]
    features = 1 << 1
    if clock is not None:
        clockid, wall, reading = clock
        bodies += [struct.pack("<Q", clockid), struct.pack("<IIQQ", 1, clockid, wall, reading)]
        features |= (1 << 23) | (1 << 29)
    header[72:104] = features.to_bytes(32, "little")
    at = end + 16 * len(bodies)
    table = b""
    for body in bodies:
        table += struct.pack("<QQ", at, len(body))
        at += len(body)
    return bytes(header) + plain[104:end] + table + b"".join(bodies)


def _perf_events(named: int) -> list[bytes]:
    """The trace.dat's events as perf samples on the capture's clock, T and T2 in P; the
    span names ``named`` as its linux.thread.id."""
    context = SpanContext(0x1234, 0x99, is_remote=False, trace_flags=TraceFlags(1))
    span = ReadableSpan("work", context, resource=RESOURCE, start_time=S, end_time=E,
                        attributes={"linux.thread.id": named})  # fmt: skip
    rid, resource = _resource_payload()
    spanned = record(SPAN_ID, encode_span(span, rid, FTRACE_MAX_PAYLOAD)[0], pid=T)
    events = [(cpu, when, raw) for cpu, when, raw in _events()[:-1]]
    events.insert(1, (1, S - 2 * MS, _kernel("syscalls/sys_enter_futex", T2)))  # T2 runs
    events.append((0, E, spanned))
    return [_perf_sample(raw, when + OFFSET, _process(tid), tid, cpu)
            for cpu, when, raw in events
            for tid in [struct.unpack_from("<i", raw, 4)[0]]]  # fmt: skip


def _process(tid: int) -> int:
    return P if tid in (T, T2) else tid


def test_perf_samples_say_which_threads_are_one_process(tmp_path, capsys):
    path = tmp_path / "perf.data"
    path.write_bytes(_perf_data(_perf_events(T2)))
    got, err = _decode(str(path), capsys)

    assert got["linux.thread.id"] == T2, err  # T2 is P's thread, as perf's samples say
    assert "refused" not in err, err
    assert "trace clock perf, estimated from 1 spans" in err, err


def test_a_trace_dat_does_not_say_so_another_thread_is_refused(tmp_path, capsys):
    events = [(cpu, when, raw) for cpu, when, raw in _events()[:-1]]
    context = SpanContext(0x1234, 0x99, is_remote=False, trace_flags=TraceFlags(1))
    span = ReadableSpan("work", context, resource=RESOURCE, start_time=S, end_time=E,
                        attributes={"linux.thread.id": 5})  # fmt: skip
    rid, _ = _resource_payload()
    events.append((0, E, record(SPAN_ID, encode_span(span, rid, FTRACE_MAX_PAYLOAD)[0], pid=T)))
    got, err = _decode(_trace_dat(tmp_path, events), capsys)

    assert got["linux.thread.id"] == 5  # the app's attribute is kept as it set it
    assert got["linux.sched.on_cpu_ns"] == 16 * MS  # but the figures are its writer's
    assert "1 spans naming a linux.thread.id not of their writer's process (refused)" in err


def test_perf_record_k_clock_data_maps_exactly(tmp_path, capsys):
    path = tmp_path / "perf.data"
    wall, reading = S - 10 * SECOND, S - 10 * SECOND + OFFSET  # one reading of both clocks
    records = _perf_events(T)
    path.write_bytes(_perf_data(records, (1, wall, reading)))
    got, err = _decode(str(path), capsys)

    assert "trace clock mono, the capture's own clock reading" in err, err
    assert got["linux.sched.on_cpu_ns"] == 16 * MS and got["off_cpu_at"] == [S + 4 * MS]


def test_a_perf_lost_record_makes_the_spans_around_it_partial(tmp_path, capsys):
    records = _perf_events(T)
    round_end = struct.pack("<IHH", 68, 0, 8)
    lost = struct.pack("<IHHQQ", 2, 0, 24, 1, 3)  # id 1, 3 samples lost
    path = tmp_path / "perf.data"
    path.write_bytes(_perf_data(records[:4] + [round_end, lost] + records[4:] + [round_end]))
    got, err = _decode(str(path), capsys)

    assert got["linux.kernel.view"] == "partial"
    assert "1 spans partial: events lost meanwhile" in err, err


def test_the_cpus_whose_start_is_kept_are_bounded(monkeypatch):
    """A perf sample's CPU number is the file's say: a hostile file's many CPUs."""
    monkeypatch.setattr(kernel_capture, "MAX_CPUS", 8)
    switch = _kernel("sched/sched_switch", 0, prev_pid=0, prev_state=0, next_pid=T)
    samples = [_perf_sample(switch, 1000 + cpu, 0, 0, cpu) for cpu in range(20)]
    raw = decode_bytes(_perf_data(samples), ["*"]).raw
    assert raw is not None
    events = CaptureKernelEvents(_kernel_formats())
    for event in raw.stream(DecoderStats()):
        events.census(event.stamp, event.cpu, event.record)
    assert sorted(events.first_stamps) == list(range(8))


def test_the_trace_clock_is_the_bracketed_name_and_nothing_else():
    assert clock_name("[local] global counter uptime perf mono mono_raw boot tai\n") == "local"
    assert clock_name("local global [tai] x86-tsc") == "tai"
    assert clock_name("x86-tsc") == "x86-tsc"
    assert clock_name("[lo cal]") is None and clock_name("[\x1b]") is None
    assert clock_name("a" * 33) is None and clock_name("") is None


# --- record --capture --kernel: the kernel's pages in an instance buffer -------------------

BUFFER = "otel-userevents-kernel"


def _two_buffers(tmp_path: Path, clock: str = "tai") -> TraceDatWriter:
    """The trace.dat's events, the kernel's in an instance buffer, ours in the top one."""
    writer = TraceDatWriter(str(tmp_path / "both.dat"), 4096, HEADER_PAGE, HEADER_EVENT, clock)
    for cpu, when, raw in _events():
        kernel = raw[:2] != struct.pack("<H", SPAN_ID) and raw[:2] != struct.pack("<H", RESOURCE_ID)
        writer.add_page(cpu, page(when + OFFSET, [data_event(0, raw)]), BUFFER if kernel else "")
    for system, text in FORMATS + _kernel_formats():
        writer.add_format(system, text)
    return writer


def test_an_instance_buffer_is_written_as_trace_cmd_writes_version_6_and_read_back(tmp_path):
    writer = _two_buffers(tmp_path)
    writer.close()
    dat = read_trace_dat(Path(writer.path).read_bytes())

    assert dat.clock == "tai" and dat.instance_buffers == [BUFFER]
    (instance,) = dat.instances
    assert instance.name == BUFFER and instance.clock == "tai"
    kernel = [(cpu, bytes(p)) for cpu, p in instance.pages()]
    ours = [(cpu, bytes(p)) for cpu, p in dat.pages()]
    assert len(kernel) == 7 and len(ours) == 2  # the resource and the span
    assert all(p[:8] != bytes(8) for _, p in kernel + ours)


def test_decode_kernel_reads_the_instance_buffer_on_the_same_clock(tmp_path, capsys):
    writer = _two_buffers(tmp_path)
    writer.close()
    got, err = _decode(writer.path, capsys)

    assert got["linux.kernel.view"] == "whole", err
    assert got["linux.sched.on_cpu_ns"] == 16 * MS and got["off_cpu_at"] == [S + 4 * MS]
    assert "trace clock tai, whole seconds, from 1 spans of 1 threads" in err
    assert f"kernel's events of trace-cmd instance buffers {BUFFER} read too" in err, err


def test_an_instance_buffer_on_another_clock_is_not_read(tmp_path, capsys):
    writer = _two_buffers(tmp_path)
    writer.close()
    data = bytearray(Path(writer.path).read_bytes())
    at = data.rindex(b"[tai]\n")  # the instance's own clock, after its table
    data[at : at + 6] = b"[loc]\n"
    Path(writer.path).write_bytes(bytes(data))
    got, err = _decode(writer.path, capsys)

    assert got["linux.kernel.view"] == "none"  # no record of its thread is read
    assert "trace clock tai" in err and "from 0 kernel events" in err


def test_spools_kept_with_an_instance_buffer_concatenate_to_the_file(tmp_path):
    writer = _two_buffers(tmp_path)
    said = writer.keep()
    command = said.split("make the trace.dat with: ", 1)[1]
    parts = command.removeprefix("cat ").split(" > ")[0].split()
    made = b"".join(Path(part).read_bytes() for part in parts)
    again = tmp_path / "again"
    again.mkdir()
    writer2 = _two_buffers(again)
    writer2.close()
    assert made == Path(writer2.path).read_bytes()


def test_the_records_of_threads_of_no_writer_are_passed_over(tmp_path, capsys):
    other = 999
    events = _events()
    events[1:1] = [
        (0, S - 2 * MS + 10, _kernel("syscalls/sys_enter_futex", other)),
        (
            1,
            S - 2 * MS + 20,
            _kernel("sched/sched_switch", other, prev_pid=other, prev_state=1, next_pid=0),
        ),  # fmt: skip
    ]
    got, err = _decode(_trace_dat(tmp_path, sorted(events, key=lambda e: e[1])), capsys)

    assert got["linux.sched.on_cpu_ns"] == 16 * MS and got["linux.kernel.view"] == "whole"
    assert "kernel view: 3 records of threads of no writer passed over" in err, err  # and 5's


def test_perf_records_not_read_are_said_with_the_kernel_view_too(tmp_path, capsys):
    compressed = struct.pack("<IHH", 81, 0, 16) + bytes(8)
    path = tmp_path / "perf.data"
    path.write_bytes(_perf_data(_perf_events(T) + [compressed]))
    got, err = _decode(str(path), capsys)

    assert got["linux.kernel.view"] == "whole"
    assert err.count("1 compressed batches not decoded") == 1, err
