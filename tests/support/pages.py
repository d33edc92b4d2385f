# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Ring-buffer pages built the way kernel/trace/ring_buffer.c writes them, for host tests."""

from __future__ import annotations

import struct

HEADER_PAGE = """\
\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
"""


def data_event(delta: int, payload: bytes) -> bytes:
    """A data event: short ones in type_len words, longer ones (or >112 bytes) with a length."""
    padded = payload + b"\0" * (-len(payload) % 4)
    if len(padded) <= 28 * 4:
        return struct.pack("<I", (delta << 5) | (len(padded) // 4)) + padded
    return struct.pack("<II", delta << 5, len(padded) + 4) + padded


def time_extend(delta: int) -> bytes:
    return struct.pack("<II", ((delta & ((1 << 27) - 1)) << 5) | 30, delta >> 27)


def absolute(ts: int) -> bytes:
    return struct.pack("<II", ((ts & ((1 << 27) - 1)) << 5) | 31, (ts >> 27) & 0xFFFFFFFF)


def padding(length: int) -> bytes:
    """A discarded event of ``length`` bytes in all (delta 1, as ring_buffer.c sets it)."""
    return struct.pack("<II", (1 << 5) | 29, length - 4) + b"\xee" * (length - 8)


def page(
    ts: int,
    events: list[bytes],
    missed: int | None = None,
    missed_flag: bool = False,
    size: int = 4096,
) -> bytes:
    data = b"".join(events)
    commit = len(data)
    tail = b""
    if missed_flag:
        commit |= 1 << 31
    if missed is not None:
        commit |= (1 << 31) | (1 << 30)
        tail = struct.pack("<Q", missed)
    body = struct.pack("<QQ", ts, commit) + data + tail
    return body + b"\0" * (size - len(body))


def record(event_id: int, payload: bytes, pid: int = 7) -> bytes:
    """A trace record: common_type, flags, preempt_count, common_pid, then the payload."""
    return struct.pack("<HBBi", event_id, 0, 0, pid) + payload
