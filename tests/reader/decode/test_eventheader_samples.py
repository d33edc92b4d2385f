# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Our EventHeader decoder against the one nobody here wrote: every EventHeader event of
LinuxTracepoints' sample captures (``TestOutput/``) decodes to the fields, values and
header that its ``perf-decode`` wrote in the JSON beside them.

Needs a LinuxTracepoints checkout (https://github.com/microsoft/LinuxTracepoints, MIT;
run against 9ff8fe86f9a33ac606605ae2510283ef062ddf6a, version 1.4.0) named by the
``LINUXTRACEPOINTS_DIR`` environment variable, else the snapshot beside the checkout
(``../shared/peers/LinuxTracepoints``, as CI has it); skipped without either. ``perf.data`` is read
by our perf.data reader (samples by timestamp, as perf-decode sorts them);
``EventHeaderInterceptorLE64.dat`` is a plain list of records (u32 size with itself,
tracepoint name, NUL, event: ``decode-dat-utest.cpp``). ``pipe.data`` holds the same
events as ``perf.data`` in perf's pipe mode, which our reader refuses; it is not read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from opentelemetry_exporter_userevents.abi.format import EventFormat, parse_format
from opentelemetry_exporter_userevents.reader.capture.perf_data import read_perf_data
from opentelemetry_exporter_userevents.reader.decode.eventheader import (
    decode_event,
    eventheader_offset,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import EventHeaderEvent
from tests.reader.decode.eventheader_json import JsonForm, errno_names, load_json, same

BESIDE = Path(__file__).resolve().parents[4] / "shared" / "peers" / "LinuxTracepoints"
PEERS = Path(os.environ.get("LINUXTRACEPOINTS_DIR") or BESIDE)
SAMPLES = PEERS / "TestOutput"
FORMATTER = PEERS / "libeventheader-decode-cpp" / "src" / "EventFormatter.cpp"

pytestmark = pytest.mark.skipif(
    not (SAMPLES / "perf.data").is_file(),
    reason="no LinuxTracepoints beside the checkout: set LINUXTRACEPOINTS_DIR (its TestOutput/)",
)


def _perf_data_events() -> list[EventHeaderEvent]:
    perf = read_perf_data((SAMPLES / "perf.data").read_bytes())
    formats: dict[int, EventFormat] = {}
    for _system, text in perf.tracing.formats:
        try:
            fmt = parse_format(text)
        except ValueError:
            continue
        formats[fmt.id] = fmt
    found: list[tuple[int, int, EventHeaderEvent]] = []
    for order, sample in enumerate(perf.samples()):
        fmt = formats[int.from_bytes(sample.raw[:2], "little")]
        offset = eventheader_offset(fmt)
        if offset is not None:
            found.append((sample.timestamp, order, decode_event(fmt.name, sample.raw[offset:])))
    assert perf.stats.corrupt == 0
    return [event for _time, _order, event in sorted(found, key=lambda item: item[:2])]


def _dat_events() -> list[EventHeaderEvent]:
    data = (SAMPLES / "EventHeaderInterceptorLE64.dat").read_bytes()
    events = []
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 4], "little")
        record = data[pos + 4 : pos + size]
        assert size > 4 and len(record) == size - 4
        name, _nul, event = record.partition(b"\0")
        events.append(decode_event(name.decode("ascii"), event))
        pos += size
    return events


def _without_times(event: list[Any]) -> list[Any]:
    """A perf.data event's JSON without what the sample, not the event, says."""
    sample_meta = {"time", "cpu", "pid", "tid"}
    out = []
    for name, value in event:
        if name == "meta":
            value = [pair for pair in value if pair[0] not in sample_meta]
        out.append([name, value])
    return out


def _compare(expected: list[list[Any]], ours: list[list[Any]]) -> None:
    assert len(ours) == len(expected), "a different number of EventHeader events"
    mismatches = [
        (index, want, got)
        for index, (want, got) in enumerate(zip(expected, ours, strict=True))
        if not same(want, got)
    ]
    shown = "\n".join(
        f"#{i}\n  want {json.dumps(w)}\n  got  {json.dumps(g)}" for i, w, g in mismatches
    )
    assert not mismatches, f"{len(mismatches)} events differ:\n{shown}"


def test_perf_data_events_decode_as_perf_decode_prints_them() -> None:
    expected = [
        _without_times(event)
        for event in load_json(SAMPLES / "perf.data.linux.json")
        if ":" in event[0][1] and not event[0][1].startswith("sched:")
    ]
    ours = [JsonForm(errno_names(FORMATTER), tags=False).event(e) for e in _perf_data_events()]
    # This JSON was written by a perf-decode that printed no field tags (the .dat's has them).
    assert len(ours) == 254
    _compare(expected, ours)


def test_interceptor_dat_events_decode_as_the_cpp_decoder_prints_them() -> None:
    expected = load_json(SAMPLES / "EventHeaderInterceptorLE64.dat.linux.json")
    ours = [JsonForm(errno_names(FORMATTER), tags=True).event(e) for e in _dat_events()]
    assert len(ours) == 374
    _compare(expected, ours)


def test_the_samples_cover_every_encoding_and_format() -> None:
    """The comparison above is only as good as what the samples hold."""
    seen: set[tuple[int, int]] = set()

    def walk(fields: Any) -> None:
        for field in fields:
            seen.add((field.encoding, field.format))
            values = field.value if field.array else [field.value]
            for value in values:
                if isinstance(value, tuple):
                    walk(value)

    for event in _dat_events():
        walk(event.fields)
    encodings = {encoding for encoding, _format in seen}
    formats = {fmt for _encoding, fmt in seen}
    assert encodings >= set(range(1, 14)), sorted(set(range(1, 14)) - encodings)
    assert formats >= set(range(0, 19)), sorted(set(range(0, 19)) - formats)
