# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Writes on a real kernel (selftests ftrace_test write_events, write_empty_events,
write_fault and write_validator)."""

import errno
import mmap
import os
import struct

import pytest

from opentelemetry_exporter_userevents import abi
from opentelemetry_exporter_userevents.abi import UserEventsError, uapi
from tests.support.kernel_support import write_with_index

pytestmark = pytest.mark.kernel


def test_enabled_write_reaches_trace_with_its_values(data, event_name, tracefs, attach):
    registration = data.register(f"{event_name} u64 start; __rel_loc char[] name")
    attach(registration)
    name = b"hello span\0"

    written = registration.write(struct.pack("<QI", 12345, uapi.rel_loc(len(name), 0)), name)

    assert written == 4 + 12 + len(name), "the kernel counts the 4 index bytes too"
    (line,) = attach.lines(registration)
    assert line.endswith(f"{registration.tracepoint}: start=0x3039 (12345) name=hello span")


def test_write_while_disabled_is_ebadf(data, event_name):
    registration = data.register(f"{event_name} u32 a")

    with pytest.raises(UserEventsError) as caught:
        registration.write(struct.pack("<I", 1))

    assert caught.value.errno == errno.EBADF
    assert "no tracer is attached" in caught.value.meaning


def test_write_with_unregistered_index_is_enoent(data, event_name):
    data.register(f"{event_name} u32 a")

    with pytest.raises(OSError) as caught:
        write_with_index(data.fd, 99, struct.pack("<I", 1))

    assert caught.value.errno == errno.ENOENT


def test_write_with_negative_index_is_einval(data, event_name):
    data.register(f"{event_name} u32 a")

    with pytest.raises(OSError) as caught:
        write_with_index(data.fd, -1, struct.pack("<I", 1))

    assert caught.value.errno == errno.EINVAL


def test_short_payload_is_einval_even_while_disabled(data, event_name):
    registration = data.register(f"{event_name} u64 a")

    with pytest.raises(UserEventsError) as caught:
        registration.write(b"\0" * 7)

    assert caught.value.errno == errno.EINVAL


def test_longer_payload_is_recorded_whole(data, event_name, tracefs, attach):
    registration = data.register(f"{event_name} u32 a")
    attach(registration)

    assert registration.write(struct.pack("<I", 7), b"extra bytes") == 4 + 4 + 11
    assert len(attach.lines(registration)) == 1


def test_field_less_event_records_an_index_only_write(data, event_name, tracefs, attach):
    registration = data.register(event_name)
    attach(registration)

    assert registration.write() == 4
    (line,) = attach.lines(registration)
    assert line.endswith(f" {registration.tracepoint}:No fields found")


def test_payload_from_a_read_only_page_even_after_dontneed(data, event_name, tmp_path, attach):
    registration = data.register(f"{event_name} u32 a")
    attach(registration)
    backing = tmp_path / "payload"
    backing.write_bytes(struct.pack("<I", 0xABCD) + bytes(mmap.PAGESIZE - 4))
    with open(backing, "rb") as file:
        page = mmap.mmap(file.fileno(), mmap.PAGESIZE, access=mmap.ACCESS_READ)
    view = memoryview(page)[:4]
    try:
        assert registration.write(view) == 8
        page.madvise(mmap.MADV_DONTNEED)
        assert registration.write(view) == 8
    finally:
        view.release()
        page.close()


def _validator_payload(loc: int, data: bytes) -> bytes:
    return struct.pack("<I", loc) + data


VALID = b"test\0"
CASES = [
    ("exact", uapi.rel_loc(len(VALID), 0), VALID, None),
    ("offset past the end", uapi.rel_loc(len(VALID), 1024), VALID, errno.EFAULT),
    ("offset one past", uapi.rel_loc(len(VALID), 1), VALID, errno.EFAULT),
    ("size past the end", uapi.rel_loc(len(VALID) + 1024, 0), VALID, errno.EFAULT),
    ("size one past", uapi.rel_loc(len(VALID) + 1, 0), VALID, errno.EFAULT),
    ("no NUL", uapi.rel_loc(4, 0), b"test", errno.EFAULT),
    ("NUL not last", uapi.rel_loc(len(VALID), 0), b"te\0st", errno.EFAULT),
]


@pytest.mark.parametrize(("case", "loc", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rel_loc_validation(data, event_name, attach, case, loc, text, expected):
    registration = data.register(f"{event_name} __rel_loc char[] data")
    attach(registration)

    try:
        registration.write(_validator_payload(loc, text))
    except UserEventsError as exc:
        assert exc.errno == expected, exc
        assert "NUL" in exc.meaning
    else:
        assert expected is None


def test_index_only_write_to_a_loc_event_is_einval_while_disabled(data, event_name):
    registration = data.register(f"{event_name} __rel_loc char[] data")

    with pytest.raises(UserEventsError) as caught:
        registration.write()

    assert caught.value.errno == errno.EINVAL


def test_data_loc_counts_from_the_record_start(data, event_name, tracefs, attach):
    registration = data.register(f"{event_name} __data_loc char[] text")
    attach(registration)
    text = b"from data_loc\0"

    registration.write(struct.pack("<I", uapi.data_loc(len(text), uapi.TRACE_ENTRY_SIZE + 4)), text)

    (line,) = attach.lines(registration)
    assert line.endswith("text=from data_loc")


def test_write_after_close_is_ebadf(tracefs, event_name):
    data = abi.UserEventsData(tracefs.path)
    registration = data.register(f"{event_name} u32 a")
    data.close()

    with pytest.raises(UserEventsError) as caught:
        registration.write(struct.pack("<I", 1))

    assert caught.value.errno == errno.EBADF
    assert os.path.basename(tracefs.path)
