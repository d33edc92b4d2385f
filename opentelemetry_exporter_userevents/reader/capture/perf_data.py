# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``perf.data`` as ``perf record -e 'user_events:...'`` writes it: the raw tracepoint
records of its samples, and the format files of its tracing data.

From ``tools/perf/Documentation/perf.data-file-format.txt`` and ``perf_event.h``: a
104-byte header (``PERFILE2``, the attr, data and event-type sections, a feature bitmap),
the attrs (``perf_event_attr`` then the section of their sample ids), the data section (a
stream of ``perf_event_header``-led records), then one section descriptor per feature
bit set, in bit order; ``HEADER_TRACING_DATA`` (bit 1) holds the tracing data block of
:mod:`.tracing_data`. A sample's fields come in the order ``perf_event.h`` lists them,
present as its attr's ``sample_type`` says; ``PERF_SAMPLE_RAW`` is the trace record.
Pipe-mode files (``perf record -o -``) and compressed records (``-z``) are refused or
counted, never misread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from opentelemetry_exporter_userevents.reader.capture.tracing_data import (
    CaptureError,
    Cursor,
    TracingData,
    read_tracing_data,
)

MAGIC = b"PERFILE2"
HEADER_SIZE = 104
HEADER_TRACING_DATA = 1
HEADER_CLOCKID = 23
HEADER_CLOCK_DATA = 29
"""``perf record -k CLOCK``: the clock's id, and one (wall clock, clock) reading."""
RECORD_LOST = 2
RECORD_LOST_SAMPLES = 13
RECORD_SAMPLE = 9
RECORD_FINISHED_ROUND = 68
"""Written by ``perf record`` after each pass over its per-CPU buffers (see
:meth:`PerfData.samples_and_rounds`)."""
RECORD_AUXTRACE = 71
RECORD_COMPRESSED = 81

SAMPLE_IP = 1 << 0
SAMPLE_TID = 1 << 1
SAMPLE_TIME = 1 << 2
SAMPLE_ADDR = 1 << 3
SAMPLE_READ = 1 << 4
SAMPLE_CALLCHAIN = 1 << 5
SAMPLE_ID = 1 << 6
SAMPLE_CPU = 1 << 7
SAMPLE_PERIOD = 1 << 8
SAMPLE_STREAM_ID = 1 << 9
SAMPLE_RAW = 1 << 10
SAMPLE_IDENTIFIER = 1 << 16

FORMAT_TOTAL_TIME_ENABLED = 1 << 0
FORMAT_TOTAL_TIME_RUNNING = 1 << 1
FORMAT_ID = 1 << 2
FORMAT_GROUP = 1 << 3
FORMAT_LOST = 1 << 4

_SECTION = struct.Struct("<QQ")
_EVENT_HEADER = struct.Struct("<IHH")


class Sample(NamedTuple):
    """The parts of a sample the decoder needs (a named tuple: there are many)."""

    timestamp: int
    cpu: int
    raw: memoryview
    pid: int = -1
    """The process of the thread it ran on (``PERF_SAMPLE_TID``; -1 without)."""


class Lost(NamedTuple):
    """Where perf recorded that the kernel lost samples (``PERF_RECORD_LOST``)."""

    samples: int


@dataclass
class PerfDataStats:
    samples: int = 0
    samples_without_raw: int = 0
    """Samples of events recorded without their raw record (not tracepoints)."""
    compressed: int = 0
    """Compressed record batches (``perf record -z``), not decoded."""
    other_records: int = 0
    """mmap, comm, round markers and the like: not ours, skipped."""
    corrupt: int = 0
    """Records that run outside their own size: the rest of the data section is skipped."""
    lost: int = 0
    """Samples the kernel lost (perf's ``LOST`` and ``LOST_SAMPLES`` records)."""


@dataclass
class PerfData:
    """A perf.data file: its tracing data and its samples' raw records."""

    tracing: TracingData
    data: memoryview
    data_section: tuple[int, int]
    sample_types: dict[int, tuple[int, int]]
    """Sample id -> (sample_type, read_format); key -1 when every attr has the same ones."""
    stats: PerfDataStats = field(default_factory=PerfDataStats)
    clockid: int | None = None
    """``perf record -k``'s clock (a ``CLOCK_*`` id); None: perf's own (``local_clock``)."""
    clock_reference: tuple[int, int] | None = None
    """(CLOCK_REALTIME ns, the clock's ns) read at one moment, when perf wrote them."""
    _fixed: tuple[int, int, int, int] | tuple[()] | None = None
    """Where every sample's raw size, time, CPU and pid are (-1: absent), when all samples
    have them at the same offsets; () when they do not; None until looked at."""

    def samples(self) -> Iterator[Sample]:
        """Every sample with a raw record, in file order; counts the rest in :attr:`stats`."""
        return (sample for sample in self.samples_and_rounds() if sample is not None)

    def samples_and_rounds(self) -> Iterator[Sample | None]:
        """:meth:`samples_rounds_and_losses` without the losses."""
        return (item for item in self.samples_rounds_and_losses() if not isinstance(item, Lost))

    def samples_rounds_and_losses(self) -> Iterator[Sample | Lost | None]:
        """:meth:`samples`, read as they are iterated, with None where perf marked the end
        of a round. Samples are in the order perf copied them out of its per-CPU buffers,
        not in time order; perf's own rule (``tools/perf/util/session.c``) says when they
        can be sorted without the rest of the file: a sample read after the end of round
        n+1 is never older than the newest sample of round n."""
        offset, size = self.data_section
        end = offset + size
        stats = self.stats
        while offset + 8 <= end:
            kind, _misc, length = _EVENT_HEADER.unpack_from(self.data, offset)
            if length < 8 or offset + length > end:
                stats.corrupt += 1
                return
            body = self.data[offset + 8 : offset + length]
            offset += length
            if kind == RECORD_AUXTRACE and len(body) >= 8:  # its payload follows the record
                offset += int.from_bytes(body[:8], "little")
                continue
            if kind == RECORD_COMPRESSED:
                stats.compressed += 1
                continue
            counted = body[8:16] if kind == RECORD_LOST else body[:8]
            if kind in (RECORD_LOST, RECORD_LOST_SAMPLES) and len(counted) == 8:
                count = int.from_bytes(counted, "little")
                stats.lost += count
                yield Lost(count)
                continue
            if kind == RECORD_FINISHED_ROUND:
                stats.other_records += 1
                yield None
                continue
            if kind != RECORD_SAMPLE:
                stats.other_records += 1
                continue
            try:
                sample = self._sample(body)
            except CaptureError:
                stats.corrupt += 1
                continue
            if sample is None:
                stats.samples_without_raw += 1
                continue
            stats.samples += 1
            yield sample

    def _sample(self, body: memoryview) -> Sample | None:
        fixed = self._fixed
        if fixed is None and -1 in self.sample_types:
            fixed = self._fixed = _fixed_layout(*self.sample_types[-1])
        if fixed:  # every sample of the file has its fields at the same offsets
            raw_at, time_at, cpu_at, pid_at = fixed
            if raw_at + 4 > len(body):
                raise CaptureError("perf sample is cut short")
            end = raw_at + 4 + _U32_AT(body, raw_at)[0]
            if end > len(body):
                raise CaptureError("perf sample: its raw record runs past it")
            return Sample(
                _U64_AT(body, time_at)[0] if time_at >= 0 else 0,
                _U32_AT(body, cpu_at)[0] if cpu_at >= 0 else 0,
                body[raw_at + 4 : end],
                _U32_AT(body, pid_at)[0] if pid_at >= 0 else -1,
            )
        cursor = Cursor(body, what="perf sample")
        if -1 in self.sample_types:
            sample_type, read_format = self.sample_types[-1]
        else:  # every sample starts with its id (PERF_SAMPLE_IDENTIFIER)
            known = self.sample_types.get(cursor.u64("sample id"))
            if known is None:
                raise CaptureError("a sample of an unknown event")
            sample_type, read_format = known
            sample_type &= ~SAMPLE_IDENTIFIER
        timestamp = cpu = 0
        pid = -1
        if sample_type & SAMPLE_IDENTIFIER:
            cursor.u64("identifier")
        if sample_type & SAMPLE_IP:
            cursor.u64("ip")
        if sample_type & SAMPLE_TID:
            pid = cursor.u32("pid")
            cursor.u32("tid")
        if sample_type & SAMPLE_TIME:
            timestamp = cursor.u64("time")
        for bit in (SAMPLE_ADDR, SAMPLE_ID, SAMPLE_STREAM_ID):
            if sample_type & bit:
                cursor.u64("addr, id or stream id")
        if sample_type & SAMPLE_CPU:
            cpu = cursor.u32("cpu")
            cursor.u32("reserved")
        if sample_type & SAMPLE_PERIOD:
            cursor.u64("period")
        if sample_type & SAMPLE_READ:
            _skip_read(cursor, read_format)
        if sample_type & SAMPLE_CALLCHAIN:
            cursor.take(8 * cursor.u64("callchain length"), "callchain")
        if not sample_type & SAMPLE_RAW:
            return None
        raw = cursor.take(cursor.u32("raw size"), "raw record")
        return Sample(timestamp, cpu, raw, pid)


_U32_AT = struct.Struct("<I").unpack_from
_U64_AT = struct.Struct("<Q").unpack_from
_FIXED_FIELDS = ((SAMPLE_IDENTIFIER, "identifier"), (SAMPLE_IP, "ip"), (SAMPLE_TID, "pid"),
                 (SAMPLE_TIME, "time"), (SAMPLE_ADDR, "addr"), (SAMPLE_ID, "id"),
                 (SAMPLE_STREAM_ID, "stream id"), (SAMPLE_CPU, "cpu"),
                 (SAMPLE_PERIOD, "period"))  # fmt: skip


def _fixed_layout(sample_type: int, read_format: int) -> tuple[int, int, int, int] | tuple[()]:
    """(raw size, time, cpu, pid) offsets of a sample type whose fields before the raw
    record are all of fixed size (no callchain, no group read), else (): each 8 bytes, in
    ``perf_event.h``'s order, as :meth:`PerfData._sample` reads them one by one."""
    if not sample_type & SAMPLE_RAW or sample_type & SAMPLE_CALLCHAIN:
        return ()
    if sample_type & SAMPLE_READ and read_format & FORMAT_GROUP:
        return ()
    at = 0
    found = {"time": -1, "cpu": -1, "pid": -1}
    for bit, name in _FIXED_FIELDS:
        if sample_type & bit:
            found[name] = at
            at += 8
    if sample_type & SAMPLE_READ:
        per_value = 1 + bool(read_format & FORMAT_ID) + bool(read_format & FORMAT_LOST)
        times = bool(read_format & FORMAT_TOTAL_TIME_ENABLED) + bool(
            read_format & FORMAT_TOTAL_TIME_RUNNING
        )
        at += 8 * (times + per_value)
    return at, found["time"], found["cpu"], found["pid"]


def _skip_read(cursor: Cursor, read_format: int) -> None:
    """Skip a ``struct read_format`` (its shape comes from the attr's read_format)."""
    per_value = 1 + bool(read_format & FORMAT_ID) + bool(read_format & FORMAT_LOST)
    times = bool(read_format & FORMAT_TOTAL_TIME_ENABLED) + bool(
        read_format & FORMAT_TOTAL_TIME_RUNNING
    )
    if read_format & FORMAT_GROUP:
        count = cursor.u64("read group size")
        cursor.take(8 * (times + count * per_value), "read values")
    else:
        cursor.take(8 * (times + per_value), "read value")


def read_perf_data(data: bytes | memoryview) -> PerfData:
    """Parse a perf.data held in memory (or mapped); raises :class:`CaptureError`."""
    cursor = Cursor(data, what="perf.data")
    cursor.expect(MAGIC, "magic")
    header_size = cursor.u64("header size")
    if header_size != HEADER_SIZE:
        raise CaptureError(
            "perf.data was written to a pipe (perf record -o -) or by an unknown perf: "
            f"header size {header_size}; record to a file"
        )
    attr_size = cursor.u64("attr size")
    attrs = _section(cursor, len(cursor.data), "attrs")
    data_section = _section(cursor, len(cursor.data), "data")
    _section(cursor, 1 << 62, "event types")
    features = int.from_bytes(cursor.take(32, "feature bits"), "little")
    if not features >> HEADER_TRACING_DATA & 1:
        raise CaptureError(
            "perf.data has no tracing data (format files): record tracepoints, e.g. "
            "perf record -e 'user_events:otel_*'"
        )
    sections = Cursor(data, data_section[0] + data_section[1], "perf.data feature sections")
    found: dict[int, memoryview] = {}
    for bit in range(HEADER_CLOCK_DATA + 1):  # one descriptor per bit set, in bit order
        if features >> bit & 1:
            try:
                offset, size = _section(sections, len(sections.data), f"feature {bit}")
            except CaptureError:
                if bit <= HEADER_TRACING_DATA:
                    raise
                break  # the clock's sections are optional: estimated without them
            found[bit] = cursor.data[offset : offset + size]
    tracing = read_tracing_data(Cursor(found[HEADER_TRACING_DATA], what="perf.data tracing data"))
    perf = PerfData(tracing, cursor.data, data_section, _sample_types(cursor, attrs, attr_size))
    _read_clock(perf, found)
    return perf


def _read_clock(perf: PerfData, found: dict[int, memoryview]) -> None:
    """``HEADER_CLOCKID`` (u64) and ``HEADER_CLOCK_DATA`` (``version:u32 clockid:u32
    wall_clock_ns:u64 clockid_time_ns:u64``, perf's ``util/header.c``); a section of
    another shape is ignored (the clock is then estimated)."""
    clockid = found.get(HEADER_CLOCKID)
    if clockid is not None and len(clockid) >= 8:
        perf.clockid = int.from_bytes(clockid[:8], "little")
    data = found.get(HEADER_CLOCK_DATA)
    if data is not None and len(data) >= 24:
        version, data_clockid, wall, clock = struct.unpack_from("<IIQQ", data)
        if version >= 1 and (perf.clockid is None or data_clockid == perf.clockid):
            perf.clockid = data_clockid
            perf.clock_reference = (wall, clock)


def _section(cursor: Cursor, limit: int, what: str) -> tuple[int, int]:
    offset, size = _SECTION.unpack(cursor.take(16, what))
    if offset + size > limit:
        raise CaptureError(f"perf.data: the {what} section runs past the end of the file")
    return int(offset), int(size)


def _sample_types(
    cursor: Cursor, attrs: tuple[int, int], attr_size: int
) -> dict[int, tuple[int, int]]:
    """Sample id -> (sample_type, read_format); one entry under -1 if all attrs agree."""
    offset, size = attrs
    if attr_size < 40 + 16 or size % attr_size:
        raise CaptureError(f"perf.data: attr size {attr_size}, attrs section of {size} bytes")
    by_id: dict[int, tuple[int, int]] = {}
    kinds = set()
    for start in range(offset, offset + size, attr_size):
        entry = Cursor(cursor.data[start : start + attr_size], what="perf.data attr")
        entry.take(24, "type, size, config, period")
        kind = (entry.u64("sample_type"), entry.u64("read_format"))
        kinds.add(kind)
        entry.offset = attr_size - 16
        ids_offset, ids_size = _section(entry, len(cursor.data), "attr ids")
        ids = Cursor(cursor.data[ids_offset : ids_offset + ids_size], what="perf.data ids")
        for _ in range(ids_size // 8):
            by_id[ids.u64("id")] = kind
    if not kinds:
        raise CaptureError("perf.data has no events")
    if len(kinds) == 1:
        return {-1: kinds.pop()}
    if not all(kind[0] & SAMPLE_IDENTIFIER for kind in kinds):
        raise CaptureError("perf.data: events sample differently and without identifiers")
    return by_id
