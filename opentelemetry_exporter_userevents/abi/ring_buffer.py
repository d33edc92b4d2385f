# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The kernel ring buffer's sub-buffer ("page") format, as ``trace_pipe_raw`` returns it.

A read of ``per_cpu/cpuN/trace_pipe_raw`` returns one sub-buffer: a header (base
timestamp, commit word), then events, each a 4-byte header (``type_len:5``,
``time_delta:27``) and a payload. Data events carry one trace record (common fields,
then the event's fields, located by its ``format`` file). The layout of the header comes
from ``events/header_page``; everything else is fixed by kernel/trace/ring_buffer.c
(Linux 6.12, see docs in the ABI reference section 4.2). This module only decodes
bytes; tracefs access lives in :mod:`.tracefs`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from opentelemetry_exporter_userevents.abi.binary import U32, U64
from opentelemetry_exporter_userevents.abi.format import parse_field_line

PADDING = 29
TIME_EXTEND = 30
TIME_STAMP = 31
MAX_DATA_TYPE_LEN = 28

MISSED_EVENTS = 1 << 31
"""Commit-word flag: events were lost (overwritten or dropped) before this page."""
MISSED_STORED = 1 << 30
"""Commit-word flag: the number lost is stored as an unsigned long after the data."""
_COMMIT_SIZE_MASK = (1 << 30) - 1
_TS_BITS = 27
_TS_MASK = (1 << 59) - 1


class PageError(ValueError):
    """A page that does not decode: its events would run outside its data."""


@dataclass(frozen=True)
class PageLayout:
    """Where the header fields of a sub-buffer are, from ``events/header_page``."""

    timestamp_offset: int = 0
    commit_offset: int = 8
    data_offset: int = 16
    page_size: int = 4096
    """Bytes per sub-buffer: one read of trace_pipe_raw."""

    @classmethod
    def from_header_page(cls, text: str, sub_buffer_size: int | None = None) -> PageLayout:
        """Parse ``events/header_page``; ``sub_buffer_size`` (an instance's
        ``buffer_subbuf_size_kb``) overrides the page size it implies."""
        fields: dict[str, tuple[int, int]] = {}
        for line in text.splitlines():
            field = parse_field_line(line)
            if field is not None:
                fields.setdefault(field.name, (field.offset, field.size))
        try:
            timestamp, commit, data = fields["timestamp"], fields["commit"], fields["data"]
        except KeyError as missing:
            raise ValueError(f"header_page has no {missing} field") from None
        page_size = sub_buffer_size or data[0] + data[1]
        if not data[0] < page_size:
            raise ValueError("header_page data offset outside the page")
        return cls(timestamp[0], commit[0], data[0], page_size)

    def __reduce__(self) -> tuple[type[PageLayout], tuple[int, int, int, int]]:
        """Pickled by its fields (for decoding workers): the compiled build's frozen class
        refuses to be rebuilt attribute by attribute."""
        return PageLayout, (
            self.timestamp_offset,
            self.commit_offset,
            self.data_offset,
            self.page_size,
        )


@dataclass
class Page:
    """The decoded events of one sub-buffer."""

    events: list[tuple[int, memoryview]]
    """(timestamp in trace-clock ns, record) for each data event, in order."""
    missed: bool
    """Events were lost before this page."""
    missed_count: int | None
    """How many, when the kernel stored the number (MISSED_STORED)."""


def parse_page(page: bytes | bytearray | memoryview, layout: PageLayout) -> Page:
    """Decode one sub-buffer. Raises PageError if it is corrupt; a zero-filled page (no
    data) decodes to no events."""
    view = memoryview(page)
    if len(view) < layout.data_offset:
        raise PageError(f"page of {len(view)} bytes is shorter than its header")
    (timestamp,) = U64.unpack_from(view, layout.timestamp_offset)
    (commit,) = U32.unpack_from(view, layout.commit_offset)  # low 32 bits (little-endian)
    size = commit & _COMMIT_SIZE_MASK
    start = layout.data_offset
    end = start + size
    if end > len(view):
        raise PageError(f"commit size {size} runs past the {len(view)}-byte page")
    missed_count = None
    if commit & MISSED_STORED:
        if end + 8 > len(view):
            raise PageError("missed-events count stored past the page")
        (missed_count,) = U64.unpack_from(view, end)
    events = list(_events(view, start, end, timestamp))
    return Page(events, bool(commit & MISSED_EVENTS), missed_count)


def _events(view: memoryview, position: int, end: int, ts: int) -> Iterator[tuple[int, memoryview]]:
    unpack = U32.unpack_from
    while position < end:
        if position + 4 > end:
            raise PageError(f"event header at {position} runs past the data")
        (header,) = unpack(view, position)
        type_len = header & 0x1F
        delta = header >> 5
        if type_len == 0 or type_len == PADDING or type_len >= TIME_EXTEND:
            if position + 8 > end:
                raise PageError(f"event at {position} runs past the data")
            (array,) = unpack(view, position + 4)
        if type_len <= MAX_DATA_TYPE_LEN:
            if type_len:
                length = type_len * 4
                payload = position + 4
            else:
                if array < 4:
                    raise PageError(f"event at {position} has length {array}")
                length = array - 4
                payload = position + 8
            if payload + length > end:
                raise PageError(f"event at {position} of {length} bytes runs past the data")
            ts += delta
            yield ts, view[payload : payload + length]
            position = payload + length
        elif type_len == PADDING:
            if delta == 0:  # the rest of the page is unused
                return
            if position + 4 + array > end:
                raise PageError(f"padding at {position} has length {array}")
            position += 4 + array  # a discarded event: its delta does not count
        elif type_len == TIME_EXTEND:
            ts += (array << _TS_BITS) + delta
            position += 8
        else:  # TIME_STAMP: absolute, 59 bits; the top bits come from the page's time
            stamp = (array << _TS_BITS) | delta
            ts = (ts & ~_TS_MASK) | stamp
            position += 8


FTRACE_MAX_PAYLOAD = 4064
"""The largest record payload (after the write index) ftrace keeps with its default 4 KiB
sub-buffers, measured on Linux 6.12: a larger one is dropped silently while writev still
reports success."""
PERF_MAX_PAYLOAD = 8184
"""The largest payload perf keeps (8 + 8184 = 8192 bytes), measured on Linux 6.12."""
