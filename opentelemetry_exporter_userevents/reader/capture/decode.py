# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A capture file to our records: trace.dat pages or perf.data samples, decoded with the
format files the file carries, merged by timestamp.

The file says which kind it is by its first bytes. Format files of events that are not
ours are ignored; ours that do not match our schemas are listed, with the reason, and
their records counted as undecodable, as the live reader does.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.reader.capture.perf_data import (
    MAGIC as PERF_MAGIC,
)
from opentelemetry_exporter_userevents.reader.capture.perf_data import (
    PerfDataStats,
    read_perf_data,
)
from opentelemetry_exporter_userevents.reader.capture.trace_dat import read_trace_dat
from opentelemetry_exporter_userevents.reader.capture.trace_dat_v7 import read_trace_dat_v7
from opentelemetry_exporter_userevents.reader.capture.tracing_data import (
    MAGIC as TRACING_MAGIC,
)
from opentelemetry_exporter_userevents.reader.capture.tracing_data import (
    CaptureError,
    TracingData,
)
from opentelemetry_exporter_userevents.reader.decoder import RecordDecoder, TraceRecord


@dataclass
class DecodedCapture:
    """What a capture file held that is ours, and what could not be read."""

    kind: str
    """``trace.dat v6``, ``trace.dat v7, zstd`` (its compression) or ``perf.data``."""
    records: list[TraceRecord]
    decoder: RecordDecoder
    tracepoints: list[str] = field(default_factory=list)
    """Our tracepoints whose formats the file carries."""
    incompatible: dict[str, str] = field(default_factory=dict)
    """Our names, not our formats: the reason."""
    notes: list[str] = field(default_factory=list)
    """What the file holds that was not decoded (instance buffers, compressed records)."""


def decode_file(path: str, prefixes: Sequence[str]) -> DecodedCapture:
    """Decode a trace.dat or perf.data; raises :class:`CaptureError` (or OSError)."""
    with open(path, "rb") as f:
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise CaptureError(f"{path} is empty") from None
    # Unmapped when the last view of it goes (records copy what they keep).
    return decode_bytes(memoryview(mapped), prefixes)


def decode_bytes(data: bytes | memoryview, prefixes: Sequence[str]) -> DecodedCapture:
    """Decode a capture held in memory."""
    head = bytes(data[:10])
    if head.startswith(TRACING_MAGIC):
        return _decode_trace_dat(data, prefixes)
    if head.startswith(PERF_MAGIC):
        return _decode_perf_data(data, prefixes)
    raise CaptureError("not a trace.dat (trace-cmd) or perf.data file")


def _decoder(tracing: TracingData, prefixes: Sequence[str], kind: str) -> DecodedCapture:
    try:
        layout = PageLayout.from_header_page(tracing.header_page, tracing.page_size)
    except ValueError as error:
        raise CaptureError(f"{kind}: header_page: {error}") from None
    decoded = DecodedCapture(kind, [], RecordDecoder(prefixes, layout))
    for _system, text in tracing.formats:
        try:
            fmt = parse_format(text)
        except ValueError:
            continue  # not a format file we need (ftrace's own have other shapes)
        if decoded.decoder.kind_of(fmt.name) is None:
            continue
        try:
            decoded.decoder.add(fmt)
        except ValueError as error:
            decoded.incompatible[fmt.name] = str(error)
            continue
        decoded.tracepoints.append(fmt.name)
    return decoded


def _decode_trace_dat(data: bytes | memoryview, prefixes: Sequence[str]) -> DecodedCapture:
    version_7 = bytes(data[len(TRACING_MAGIC) : len(TRACING_MAGIC) + 2]) == b"7\0"
    dat = read_trace_dat_v7(data) if version_7 else read_trace_dat(data)
    kind = f"trace.dat v7, {dat.compression}" if version_7 else "trace.dat v6"
    decoded = _decoder(dat.tracing, prefixes, kind)
    per_cpu: dict[int, list[TraceRecord]] = {}
    for cpu, page in dat.pages():
        decoded.decoder.decode_page(page, per_cpu.setdefault(cpu, []))
    decoded.records = _merged(per_cpu.values())
    if dat.instance_buffers:
        decoded.notes.append(
            "trace-cmd instance buffers not decoded: " + ", ".join(dat.instance_buffers)
        )
    if dat.cut_short:
        decoded.notes.append(f"the file is cut short: {dat.cut_short} bytes of pages missing")
    return decoded


def _decode_perf_data(data: bytes | memoryview, prefixes: Sequence[str]) -> DecodedCapture:
    perf = read_perf_data(data)
    decoded = _decoder(perf.tracing, prefixes, "perf.data")
    records: list[TraceRecord] = []
    for sample in perf.samples():
        decoded.decoder.decode_record(sample.timestamp, sample.raw, records)
    records.sort(key=lambda record: record.timestamp)
    decoded.records = records
    decoded.notes.extend(_perf_notes(perf.stats))
    return decoded


def _perf_notes(stats: PerfDataStats) -> list[str]:
    notes = []
    if stats.compressed:
        notes.append(
            f"{stats.compressed} compressed batches not decoded (recorded with -z: "
            "record without it, or 'perf inject' to decompress)"
        )
    if stats.corrupt:
        notes.append(f"{stats.corrupt} damaged records skipped")
    if stats.samples_without_raw:
        notes.append(f"{stats.samples_without_raw} samples without a raw record skipped")
    return notes


def _merged(per_cpu: Iterable[list[TraceRecord]]) -> list[TraceRecord]:
    """Records of all CPUs by timestamp (stable: a CPU's own order is kept on ties)."""
    records = [record for cpu_records in per_cpu for record in cpu_records]
    records.sort(key=lambda record: record.timestamp)
    return records
