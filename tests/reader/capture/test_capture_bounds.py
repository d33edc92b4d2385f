# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Capture files are untrusted input to a reader that runs as root: compressed blocks that
inflate beyond what they declare (zlib and zstd bombs) are a CaptureError without the
allocation; damaged compressed captures (cut, flipped bytes, wrong declared sizes) give a
CaptureError or counted skips, through ``decode_bytes`` and through ``otel-userevents
decode``; and decoding is lazy (records come before the last page is read, memory holds a
chunk, not a file)."""

from __future__ import annotations

import contextlib
import io
import os
import struct
import tempfile
import tracemalloc
import zlib

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.capture import CaptureError, decode_file
from opentelemetry_exporter_userevents.reader.capture.compression import MAX_CHUNK, decompressor
from opentelemetry_exporter_userevents.reader.capture.decode import decode_bytes
from tests.reader.capture.test_capture import FORMATS, _capture, _cpu_pages, _pages, _records
from tests.support.captures import perf_data, perf_sample, trace_dat_v7

BOMB_SIZE = 256 << 20
"""What a bomb inflates to: far beyond its chunk's declared size and the cap."""


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


COMPRESSORS = {"zlib": zlib.compress, "zstd": _zstd}


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    """A few hundred KiB of zlib, a few KiB of zstd, each inflating to 256 MiB of zeros."""
    zeros = bytes(BOMB_SIZE)
    return {"zlib": zlib.compress(zeros, 9), "zstd": _zstd(zeros)}


def _v7(name: str, raws: list[bytes], replace: dict[bytes, bytes] | None = None,
        chunk_pages: int = 1) -> tuple[bytes, list[int]]:  # fmt: skip
    """A v7 capture of ``raws`` compressed with ``name`` (a chunk whose pages are a key of
    ``replace`` gets that compressed data instead), and where each chunk header is."""
    packed_chunks: list[tuple[bytes, int]] = []

    def compress(body: bytes) -> bytes:
        packed = (replace or {}).get(body) or COMPRESSORS[name](body)
        packed_chunks.append((packed, len(body)))
        return packed

    data = trace_dat_v7(FORMATS, _cpu_pages(raws), name, compress, chunk_pages)
    headers = []
    for packed, size in packed_chunks[4:]:  # the first four are the sections
        headers.append(data.index(struct.pack("<II", len(packed), size) + packed))
    return data, headers


@pytest.mark.parametrize("name", ["zlib", "zstd"])
def test_a_bomb_is_a_capture_error_without_the_allocation(name, bombs):
    _, _, raws = _records()
    last_page = _cpu_pages(raws)[1][-1]
    data, _ = _v7(name, raws, {last_page: bombs[name]})

    decoded = decode_bytes(data, ["*"])
    tracemalloc.start()
    try:
        with pytest.raises(CaptureError, match="inflates beyond the 4096 bytes it declares"):
            list(decoded.records)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak} bytes allocated for a 4096-byte chunk"


@pytest.mark.parametrize("name", ["zlib", "zstd"])
def test_every_block_is_bounded_by_its_declared_size_and_the_cap(name, bombs):
    inflate = decompressor(name)
    assert inflate is not None
    tracemalloc.start()
    try:
        for size in (0, 4096, MAX_CHUNK):
            with pytest.raises(CaptureError, match=f"inflates beyond the {size} bytes"):
                inflate(bombs[name], size)
        for size in (MAX_CHUNK + 1, BOMB_SIZE, (1 << 32) - 1):  # refused before inflating
            with pytest.raises(CaptureError, match=f"declares {size} bytes uncompressed"):
                inflate(bombs[name], size)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_CHUNK + (8 << 20), f"{peak} bytes for blocks capped at {MAX_CHUNK}"
    good = COMPRESSORS[name](b"x" * 5000)
    assert bytes(inflate(good, 5000)) == b"x" * 5000
    for bad, size in ((good[:-4], 5000), (good, 4999), (good, 5001), (bytes(16), 5000)):
        with pytest.raises(CaptureError):
            inflate(bad, size)


def test_a_chunk_declaring_more_than_the_cap_is_refused_before_any_record(tmp_path):
    _, _, raws = _records()
    data, headers = _v7("zlib", raws)
    data = bytearray(data)
    struct.pack_into("<I", data, headers[-1] + 4, MAX_CHUNK + 1)
    with pytest.raises(CaptureError, match=f"declares {MAX_CHUNK + 1} bytes uncompressed"):
        decode_bytes(bytes(data), ["*"])


def _damaged_inputs() -> list[tuple[bytes, list[int]]]:
    _, _, raws = _records()
    return [_v7(name, raws, chunk_pages=chunk) for name in COMPRESSORS for chunk in (1, 2)]


_DAMAGED = _damaged_inputs()
_damage = st.fixed_dictionaries(
    {
        "which": st.integers(0, len(_DAMAGED) - 1),
        "flips": st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4),
        "sizes": st.lists(
            st.tuples(st.integers(0, 64), st.booleans(), st.integers(0, (1 << 32) - 1)),
            max_size=3,
        ),
        "cut": st.one_of(st.none(), st.integers(1, 1 << 20)),
    }
)


def _damage_file(which: int, flips, sizes, cut) -> bytes:
    """A compressed capture with bytes flipped, chunk sizes (compressed or uncompressed)
    rewritten, and cut short."""
    valid, headers = _DAMAGED[which]
    data = bytearray(valid)
    for position, value in flips:
        data[position % len(data)] ^= value or 1
    for chunk, uncompressed, value in sizes:
        struct.pack_into("<I", data, headers[chunk % len(headers)] + 4 * uncompressed, value)
    return bytes(data[: max(1, len(data) - cut % len(data))] if cut else data)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_damage)
def test_damaged_compressed_captures_decode_or_give_a_capture_error(damage):
    try:
        decoded = decode_bytes(_damage_file(**damage), ["*"])
        records = list(decoded.records)
    except CaptureError:
        return
    assert decoded.decoder.stats.records == len(records)
    assert {item.kind for item in records} <= {"span", "log", "resource"}


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(_damage)
def test_decode_of_a_damaged_compressed_capture_exits_cleanly(damage):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "damaged.dat")
        with open(path, "wb") as f:
            f.write(_damage_file(**damage))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["decode", path, "-o", os.path.join(directory, "out.json")])
    assert code in (0, 1), err.getvalue()
    assert "Traceback" not in err.getvalue()
    assert code == 0 or "otel-userevents: " in err.getvalue()


def test_decode_writes_what_came_before_a_chunk_that_does_not_inflate(tmp_path, capsys, bombs):
    _, _, raws = _records()
    last_page = _cpu_pages(raws)[1][-1]
    data, _ = _v7("zstd", raws, {last_page: bombs["zstd"]})
    path = tmp_path / "bomb.dat"
    path.write_bytes(data)
    out = tmp_path / "out.json"

    assert cli.main(["decode", str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "inflates beyond the 4096 bytes it declares" in err
    assert "records of 3 tracepoints" in err  # the summary of what was read came first
    assert out.read_text()  # what came before the bomb was written


def test_trace_dat_records_come_before_the_last_page_is_decoded(tmp_path):
    _, _, raws = _records()
    pages = [(0, raw) for _, raw in _pages(raws * 20)]  # one CPU, one record a page
    decoded = decode_file(_capture(tmp_path, pages), ["*"])

    first = next(decoded.records)
    assert first.kind == "resource"
    assert decoded.decoder.stats.pages == 1, "the file was decoded before its first record"
    assert 1 + sum(1 for _ in decoded.records) == decoded.decoder.stats.records
    assert decoded.decoder.stats.pages == len(pages)


@pytest.mark.parametrize("name", ["zlib", "zstd"])
def test_compressed_cpu_data_inflates_a_chunk_at_a_time(name):
    _, _, raws = _records()
    raws = raws * 200  # 2,000 pages, 8 MiB inflated
    data, _ = _v7(name, raws, chunk_pages=4)
    tracemalloc.start()
    try:
        decoded = decode_bytes(data, ["*"])
        count = sum(1 for _ in decoded.records)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == decoded.decoder.stats.records > 1000
    assert decoded.decoder.stats.pages == len(raws)
    assert peak < 2 << 20, f"{peak} bytes held: more than a few chunks' worth"


def test_perf_data_records_come_round_by_round():
    _, _, raws = _records()
    round_end = struct.pack("<IHH", 68, 0, 8)  # PERF_RECORD_FINISHED_ROUND
    samples = []
    for number in range(20):  # each round: its samples out of order, and older than the next
        samples += [perf_sample(raw, 1000 * number + 100 - n) for n, raw in enumerate(raws)]
        samples.append(round_end)
    decoded = decode_bytes(perf_data(FORMATS, samples), ["otel"])

    next(decoded.records)
    assert decoded.decoder.stats.records < 3 * len(raws), "it read the whole file first"
    rest = list(decoded.records)
    times = [record.timestamp for record in rest]
    assert times == sorted(times) and len(rest) + 1 == decoded.decoder.stats.records
    assert decoded.notes == []  # perf's notes are added once every record is read


def test_cpus_whose_chunks_together_exceed_the_budget_are_refused_when_opened():
    _, _, raws = _records()
    one_page = _cpu_pages(raws)[0][:1]
    packed = zlib.compress(one_page[0])
    data = bytearray(
        trace_dat_v7(FORMATS, dict.fromkeys(range(9), one_page), "zlib", zlib.compress)
    )
    header = struct.pack("<II", len(packed), 4096) + packed
    start = 0
    while (start := data.find(header, start)) >= 0:  # each CPU's chunk declares the cap
        struct.pack_into("<I", data, start + 4, MAX_CHUNK)
        start += 1
    with pytest.raises(CaptureError, match=f"would hold {9 * MAX_CHUNK} bytes of inflated"):
        decode_bytes(bytes(data), ["*"])
