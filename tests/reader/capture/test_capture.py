# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""trace.dat and perf.data on the host: what ``record --capture`` writes, ``decode`` reads
back record for record; perf.data samples as perf lays them out; and damaged files give a
clear error or counted skips, never another exception (fuzzed)."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents._export.log_encoder import encode_log
from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD
from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.capture import (
    CaptureError,
    TraceDatWriter,
    decode_file,
)
from opentelemetry_exporter_userevents.reader.capture.decode import decode_bytes
from opentelemetry_exporter_userevents.reader.capture.perf_data import (
    SAMPLE_IDENTIFIER,
    read_perf_data,
)
from opentelemetry_exporter_userevents.reader.capture.trace_dat import read_trace_dat
from opentelemetry_exporter_userevents.reader.capture.tracing_data import (
    Cursor,
    read_tracing_data,
    write_tracing_data,
)
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json
from opentelemetry_exporter_userevents.record import anyvalue, schema
from opentelemetry_exporter_userevents.record.resource_id import hash_resource
from tests.support.captures import (
    HEADER_EVENT,
    PERF_SAMPLE_TYPE,
    format_text,
    perf_data,
    perf_sample,
    trace_dat_v7,
    tracing_data,
)
from tests.support.otlp import flatten
from tests.support.pages import HEADER_PAGE, data_event, page, record
from tests.support.span_fixtures import RESOURCE, make_logs, make_spans

SPAN_ID, LOG_ID, RESOURCE_ID, OTHER_ID = 301, 302, 303, 304
MULTI = "user_events_multi"
FORMATS = [
    (MULTI, format_text(schema.SPAN, "otel_span.1f", SPAN_ID)),
    (MULTI, format_text(schema.LOG, "otel_log_info.1f", LOG_ID)),
    (MULTI, format_text(schema.RESOURCE, "otel_resource.1f", RESOURCE_ID)),
    ("sched", "name: sched_switch\nID: 305\nformat:\n\tfield:int prev_pid;\toffset:8;"
              '\tsize:4;\tsigned:1;\n\nprint fmt: "%d"\n'),
    (MULTI, "name: otel_span.2\nID: 306\nformat:\n\tfield:u32 x;\toffset:8;\tsize:4;"
            '\tsigned:0;\n\nprint fmt: "%u"\n'),
    ("ftrace", "name: function\nID: 1\nformat:\n\tfield:unsigned long ip;\toffset:8;"
               '\tsize:8;\tsigned:0;\n\nprint fmt: "%lx"\n'),
]  # fmt: skip


def _resource_payload() -> tuple[int, bytes]:
    attributes = anyvalue.encode(dict(RESOURCE.attributes)).encode()
    url = RESOURCE.schema_url.encode()
    rid = hash_resource(attributes, url)
    return rid, schema.RESOURCE.pack((rid, 1000), (attributes, url))


def _records(spans=None, logs=None) -> tuple[list, list, list[bytes]]:
    """(spans, logs, trace records), the resource's first."""
    spans, logs = spans or make_spans(), logs or make_logs()
    rid, resource = _resource_payload()
    raws = [record(RESOURCE_ID, resource)]
    raws += [record(SPAN_ID, encode_span(span, rid, FTRACE_MAX_PAYLOAD)[0]) for span in spans]
    raws += [record(LOG_ID, encode_log(log, rid, FTRACE_MAX_PAYLOAD)[0]) for log in logs]
    raws.append(record(OTHER_ID, b"\1\0\0\0"))  # not ours: counted, not decoded
    return spans, logs, raws


def _pages(raws: list[bytes]) -> list[tuple[int, bytes]]:
    """Records spread over two CPUs, one per page, timestamps interleaved across CPUs."""
    return [(n % 2, page(1000 + 10 * n, [data_event(0, raw)])) for n, raw in enumerate(raws)]


def _capture(tmp_path, pages, formats=FORMATS) -> str:
    path = str(tmp_path / "capture.dat")
    writer = TraceDatWriter(path, 4096, HEADER_PAGE, HEADER_EVENT)
    for cpu, raw in pages:
        writer.add_page(cpu, raw)
    for system, text in formats + formats:  # the same format twice is carried once
        writer.add_format(system, text)
    writer.close("42 app\n")
    writer.close()  # idempotent
    return path


def test_a_capture_is_a_trace_dat_v6_with_page_aligned_cpu_data(tmp_path):
    _, _, raws = _records()
    path = _capture(tmp_path, _pages(raws))
    data = open(path, "rb").read()
    dat = read_trace_dat(data)

    assert data[:12] == b"\x17\x08\x44tracing6\0" and dat.tracing.version == "6"
    assert dat.tracing.page_size == 4096 and dat.tracing.header_page == HEADER_PAGE
    assert sorted(dat.tracing.formats) == sorted(FORMATS)
    assert dat.tracing.cmdlines == "42 app\n"
    assert [len(blob) for _, blob in dat.cpu_data] == [
        4096 * -(-len(raws) // 2),
        4096 * (len(raws) // 2),
    ]
    assert all(isinstance(blob, memoryview) for _, blob in dat.cpu_data)  # no copies
    table = data.index(b"flyrecord\0") + 10
    offsets = [struct.unpack_from("<Q", data, table + 16 * cpu)[0] for cpu in (0, 1)]
    assert all(offset % 4096 == 0 for offset in offsets)
    assert [bytes(p) for _, p in dat.pages()] == [
        raw for cpu in (0, 1) for c, raw in _pages(raws) if c == cpu
    ]
    assert not list((tmp_path).glob(".capture-*"))  # the spools are gone


def test_decode_gives_every_record_in_timestamp_order_and_lists_what_is_not_ours(tmp_path):
    spans, logs, raws = _records()
    decoded = decode_file(_capture(tmp_path, _pages(raws)), ["*"])
    records = list(decoded.records)

    assert decoded.kind == "trace.dat v6"
    assert sorted(decoded.tracepoints) == ["otel_log_info.1f", "otel_resource.1f", "otel_span.1f"]
    assert list(decoded.incompatible) == ["otel_span.2"]
    assert [r.kind for r in records] == ["resource"] + ["span"] * len(spans) + ["log"] * len(logs)
    assert [r.values["span_id"] for r in records[1 : 1 + len(spans)]] == [
        format(span.context.span_id, "016x") for span in spans
    ]
    assert [r.timestamp for r in records] == sorted(r.timestamp for r in records)
    assert decoded.decoder.stats.undecodable == 1  # the sched record
    assert list(decode_file(_capture(tmp_path, _pages(raws)), ["billing"]).records) == []


def _encodable(items: list, request) -> list:
    """Items OTLP can carry (the fixtures include integers beyond 64 bits on purpose)."""
    kept = []
    for item in items:
        try:
            request([item])
        except ValueError:
            continue
        kept.append(item)
    return kept


def test_cli_decode_writes_what_the_app_handed_to_the_sdk(tmp_path, capsys):
    spans, logs, raws = _records(
        _encodable(make_spans(), otlp_json.spans_request),
        _encodable(make_logs(), otlp_json.logs_request),
    )
    path = _capture(tmp_path, _pages(raws))
    out = tmp_path / "out.json"

    assert cli.main(["decode", path, "-o", str(out)]) == 0
    requests = [json.loads(line) for line in out.read_text().splitlines()]
    got_spans = flatten([r for r in requests if "resourceSpans" in r], "spans")
    got_logs = flatten([r for r in requests if "resourceLogs" in r], "logs")
    assert got_spans == flatten([otlp_json.spans_request(spans)], "spans")
    assert got_logs == flatten([otlp_json.logs_request(logs)], "logs")
    err = capsys.readouterr().err
    assert "(trace.dat v6)" in err and "not decoding otel_span.2" in err
    assert f"{len(spans)} spans and {len(logs)} logs rebuilt" in err


def test_cli_decode_refuses_what_it_cannot_read_with_a_reason(tmp_path, capsys):
    cases = {
        "empty": b"",
        "text": b"hello world, not a capture",
        "v8": b"\x17\x08\x44tracing8\0\0\x08" + struct.pack("<I", 4096) + b"none\0" * 9,
        "lz4": b"\x17\x08\x44tracing7\0\0\x08" + struct.pack("<I", 4096) + b"lz4\0" * 9,
        "big-endian": b"\x17\x08\x44tracing6\0\x01\x08" + bytes(64),
        "pipe": b"PERFILE2" + struct.pack("<Q", 16) + bytes(64),
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        assert cli.main(["decode", str(path)]) == 1, name
    err = capsys.readouterr().err
    assert "is empty" in err and "not a trace.dat (trace-cmd) or perf.data file" in err
    assert "version 8 is not supported (6 and 7 are)" in err
    assert "compressed with 'lz4', which is not supported" in err
    assert "big-endian" in err and "written to a pipe" in err
    assert cli.main(["decode", str(tmp_path / "missing")]) == 1


def test_perf_data_samples_decode_by_their_raw_records():
    spans, logs, raws = _records()
    samples = [perf_sample(raw, 5000 - n, cpu=n % 2) for n, raw in enumerate(raws)]
    data = perf_data(FORMATS, [struct.pack("<IHH", 3, 0, 16) + bytes(8), *samples])

    perf = read_perf_data(data)
    assert perf.tracing.version == "0.6" and perf.sample_types == {-1: (PERF_SAMPLE_TYPE, 0)}
    decoded = decode_bytes(data, ["otel"])
    assert decoded.kind == "perf.data"
    # written in reverse time order: decode sorts by the samples' times
    kinds = [r.kind for r in decoded.records]
    assert kinds == ["log"] * len(logs) + ["span"] * len(spans) + ["resource"]
    assert len(list(perf.samples())) == len(raws)
    assert perf.stats.samples == len(raws) and perf.stats.other_records == 1


def test_perf_data_with_events_sampled_differently_uses_the_identifiers():
    _, _, raws = _records()
    types = (PERF_SAMPLE_TYPE | SAMPLE_IDENTIFIER, PERF_SAMPLE_TYPE | SAMPLE_IDENTIFIER | 1 << 3)
    samples = [perf_sample(raw, 100 + n, sample_type=types[0], sample_id=1)
               for n, raw in enumerate(raws)]  # fmt: skip
    samples.append(perf_sample(raws[1], 99, sample_type=types[0], sample_id=7))  # unknown id
    decoded = decode_bytes(perf_data(FORMATS, samples, types), ["otel"])
    assert len(list(decoded.records)) == len(raws) - 1
    assert "1 damaged records skipped" in decoded.notes


def test_tracing_data_round_trips():
    data = tracing_data(FORMATS, "6")
    data.cmdlines = "1 init\n"
    again = read_tracing_data(Cursor(write_tracing_data(data)))
    assert sorted(again.formats) == sorted(FORMATS)
    assert (again.header_page, again.header_event, again.cmdlines) == (
        HEADER_PAGE,
        HEADER_EVENT,
        "1 init\n",
    )


def _valid_files() -> list[bytes]:
    _, _, raws = _records()
    writer_pages = b"".join(raw for _, raw in _pages(raws[:3]))
    dat = write_tracing_data(tracing_data(FORMATS[:3], "6")) + struct.pack("<I", 1)
    dat += b"flyrecord\0"
    offset = len(dat) + 16
    dat += struct.pack("<QQ", offset, len(writer_pages)) + writer_pages
    perf = perf_data(FORMATS[:3], [perf_sample(raw, n) for n, raw in enumerate(raws[:3])])
    pages = {0: [raw for _, raw in _pages(raws[:3])]}
    v7 = trace_dat_v7(FORMATS[:3], pages, "zstd", zstandard.ZstdCompressor().compress, 1)
    return [dat, perf, v7]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    which=st.integers(0, 2),
    cuts=st.lists(st.tuples(st.integers(0, 1 << 16), st.binary(max_size=8)), max_size=6),
    truncate=st.integers(0, 1 << 16),
)
def test_damaged_captures_give_a_capture_error_or_counted_skips(which, cuts, truncate):
    data = bytearray(_VALID[which])
    for position, replacement in cuts:
        position %= len(data)
        data[position : position + len(replacement)] = replacement
    data = data[: max(1, len(data) - truncate % len(data))] if truncate % 3 == 0 else data
    try:
        decoded = decode_bytes(bytes(data), ["*"])
        records = list(decoded.records)
    except CaptureError:
        return
    stats = decoded.decoder.stats
    assert stats.records == len(records)
    for item in records:
        assert item.kind in ("span", "log", "resource")


_VALID = _valid_files()


def test_the_fuzzed_files_decode_when_undamaged():
    for data in _VALID:
        assert len(list(decode_bytes(data, ["*"]).records)) == 3


@pytest.mark.parametrize("version", ["6", "0.6"])
def test_a_truncated_tracing_data_says_where(version):
    data = write_tracing_data(tracing_data(FORMATS, version))
    with pytest.raises(CaptureError, match="cut short"):
        read_tracing_data(Cursor(data[:-3]))


def _cpu_pages(raws: list[bytes]) -> dict[int, list[bytes]]:
    by_cpu: dict[int, list[bytes]] = {}
    for cpu, raw in _pages(raws):
        by_cpu.setdefault(cpu, []).append(raw)
    return by_cpu


@pytest.mark.parametrize(
    "compression",
    [("zstd", lambda b: zstandard.ZstdCompressor().compress(b)), ("zlib", zlib.compress),
     ("none", None)],
    ids=["zstd", "zlib", "none"],
)  # fmt: skip
def test_trace_dat_v7_as_trace_cmd_writes_it_decodes_like_v6(tmp_path, compression):
    name, compress = compression
    spans, logs, raws = _records()
    v7 = tmp_path / "v7.dat"
    v7.write_bytes(trace_dat_v7(FORMATS, _cpu_pages(raws), name, compress))

    decoded = decode_file(str(v7), ["*"])
    assert decoded.kind == f"trace.dat v7, {name}"
    v6 = decode_file(_capture(tmp_path, _pages(raws)), ["*"])
    records = list(decoded.records)
    assert records == list(v6.records) and len(records) == len(raws) - 1
    assert list(decoded.incompatible) == ["otel_span.2"]


def test_a_damaged_compressed_chunk_is_a_capture_error(tmp_path):
    _, _, raws = _records()
    data = bytearray(trace_dat_v7(FORMATS, _cpu_pages(raws), "zlib", zlib.compress))
    chunk = data.rindex(b"\x78\x9c")  # the last zlib stream: a CPU's last chunk
    data[chunk + 2 : chunk + 10] = bytes(8)
    with pytest.raises(CaptureError, match="does not inflate|inflated to"):
        list(decode_bytes(bytes(data), ["*"]).records)
