# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Registration and its errors on a real kernel (selftests ftrace_test register_events,
dyn_test basic/loc/size types, abi_test flags and bit_sizes)."""

import errno
import mmap
import os
import re

import pytest

from opentelemetry_exporter_userevents import abi
from opentelemetry_exporter_userevents.abi import (
    USER_EVENT_REG_MULTI_FORMAT,
    USER_EVENT_REG_PERSIST,
    UserEventsData,
    UserEventsError,
    uapi,
)
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENT_REG_MAX
from tests.support.kernel_support import drop_privileges, in_child, wait_until

pytestmark = pytest.mark.kernel

SINGLE = 0


def test_first_registration_is_index_zero_and_reregistration_reuses_it(data, event_name):
    first = data.register(f"{event_name} u32 count", SINGLE)
    again = data.register(f"{event_name} u32 count", SINGLE)
    other = data.register(f"{event_name}_other u32 count", SINGLE)

    assert first.write_index == 0
    assert again.write_index == 0, "same event on the same fd keeps its index"
    assert again.enable_address != first.enable_address
    assert other.write_index == 1


def test_same_enable_address_and_bit_is_eaddrinuse(data, event_name):
    first = data.register(f"{event_name} u32 count", SINGLE)

    with pytest.raises(UserEventsError) as caught:
        uapi.register_ioctl(data.fd, f"{event_name}_b u32 x", SINGLE, first.enable_address, 0)

    assert caught.value.errno == errno.EADDRINUSE
    assert "EADDRINUSE" in str(caught.value) and f"{event_name}_b u32 x" in str(caught.value)
    assert "enable address" in caught.value.meaning


def test_other_bits_of_one_word_register_separately(data, event_name):
    """Selftest register_events: the same event on bits 30 and 29 of one word."""
    word = mmap.mmap(-1, mmap.PAGESIZE)
    view = memoryview(word).cast("I")
    address = int(uapi.ffi.cast("uintptr_t", uapi.ffi.from_buffer(word)))
    try:
        assert uapi.register_ioctl(data.fd, f"{event_name} u32 a", SINGLE, address, 30) == 0
        assert uapi.register_ioctl(data.fd, f"{event_name} u32 a", SINGLE, address, 29) == 0
        data.tracefs.set_enabled("user_events", event_name, True)
        assert view[0] == (1 << 30) | (1 << 29)
        data.tracefs.set_enabled("user_events", event_name, False)
        assert view[0] == 0
    finally:
        uapi.unregister_ioctl(data.fd, address, 30)
        uapi.unregister_ioctl(data.fd, address, 29)
        view.release()


def test_single_format_fields_match_without_space_after_semicolon(data, event_name):
    first = data.register(f"{event_name} u32 a;u32 b", SINGLE)
    second = data.register(f"{event_name} u32 a; u32 b", SINGLE)
    trailing = data.register(f"{event_name} u32 a; u32 b;", SINGLE)

    assert first.write_index == second.write_index == trailing.write_index


def test_single_format_with_other_fields_is_eaddrinuse(data, event_name):
    data.register(f"{event_name} u32 a", SINGLE)

    with pytest.raises(UserEventsError) as caught:
        data.register(f"{event_name} u64 a", SINGLE)

    assert caught.value.errno == errno.EADDRINUSE


ACCEPTED = [
    "u64 a", "u32 a", "u16 a", "u8 a", "char a", "unsigned char a", "int a", "unsigned int a",
    "short a", "unsigned short a", "char[20] a", "unsigned char[20] a", "char[0x14] a",
    "unsigned char[0x14] a", "s8 a", "s16 a", "s32 a", "s64 a",
    "__data_loc char[] a", "__data_loc unsigned char[] a",
    "__rel_loc char[] a", "__rel_loc unsigned char[] a",
    "struct custom a 20",
]  # fmt: skip
REJECTED = [
    "char[aa] a", "char[9999] a", "char[0x0000000000001] a", "char[0] a", "long a",
    "bool a", "u8[4] a", "struct custom a", "char a 20", "u32  a", "u32 a ",
]  # fmt: skip


@pytest.mark.parametrize("field", ACCEPTED)
def test_accepted_field_types(data, event_name, field, tracefs):
    registration = data.register(f"{event_name} {field}", USER_EVENT_REG_MULTI_FORMAT)

    fmt = tracefs.read_format(registration.system, registration.tracepoint)
    wanted = abi.command_fields(registration.command)
    assert [(f.type, f.name, f.size) for f in fmt.fields] == wanted


@pytest.mark.parametrize("field", REJECTED)
def test_rejected_field_types_are_einval(data, event_name, field):
    with pytest.raises(UserEventsError) as caught:
        data.register(f"{event_name} {field}", USER_EVENT_REG_MULTI_FORMAT)

    assert caught.value.errno == errno.EINVAL
    assert data.multi_format is not False, "a bad command must not look like an old kernel"


def test_command_of_512_bytes_is_einval_and_511_is_accepted(data, event_name, tracefs):
    head = f"{event_name} " + "; ".join(f"u32 f{i}" for i in range(40)) + "; u8 "
    command_511 = head + "z" * (511 - len(head))
    assert len(command_511) == 511

    with pytest.raises(UserEventsError) as caught:
        uapi.register_ioctl(data.fd, command_511 + "z", SINGLE, _fresh_word(), 0)
    registration = data.register(command_511, SINGLE)

    assert caught.value.errno == errno.EINVAL
    fields = tracefs.read_format("user_events", event_name).fields
    assert len(fields) == 41 and fields[-1].name == "z" * (511 - len(head))
    assert registration.write_index >= 0


def test_trailing_space_after_a_type_gives_a_field_with_an_empty_name(data, event_name, tracefs):
    """The kernel rejects "u32" (no name) but accepts "u32 ", naming the field ""."""
    with pytest.raises(UserEventsError):
        data.register(f"{event_name} u32", SINGLE)
    data.register(f"{event_name}_empty u32 ", SINGLE)

    (field,) = tracefs.read_format("user_events", f"{event_name}_empty").fields
    assert (field.type, field.name, field.offset, field.size) == ("u32", "", 8, 4)


_words = []


def _fresh_word() -> int:
    """An aligned word of our own, for registrations the test expects to fail."""
    word = uapi.ffi.new("uint64_t *")
    _words.append(word)
    return int(uapi.ffi.cast("uintptr_t", word))


def test_colon_in_name_is_einval(data, event_name):
    with pytest.raises(UserEventsError) as caught:
        data.register(f"{event_name}:flag u32 a", SINGLE)

    assert caught.value.errno == errno.EINVAL


def test_unknown_flag_is_einval_and_creates_nothing(data, event_name, tracefs):
    with pytest.raises(UserEventsError) as caught:
        data.register(f"{event_name} u32 a", USER_EVENT_REG_MAX)

    assert caught.value.errno == errno.EINVAL
    assert event_name not in tracefs.events("user_events")


def test_persist_survives_unregister_and_close_until_deleted(tracefs, event_name):
    data = UserEventsData(tracefs.path)
    registration = data.register(f"{event_name} u32 a", USER_EVENT_REG_PERSIST)
    registration.unregister()
    data.close()

    assert not wait_until(lambda: event_name not in tracefs.events("user_events"), 1.0)
    with UserEventsData(tracefs.path) as deleter:
        deleter.delete(event_name)
    assert wait_until(lambda: event_name not in tracefs.events("user_events"))


def test_persist_without_perfmon_is_eperm(data, event_name):
    def register_unprivileged():
        drop_privileges()
        try:
            data.register(f"{event_name} u32 a", USER_EVENT_REG_PERSIST)
        except UserEventsError as exc:
            return [exc.errno, str(exc)]
        return None

    err, text = in_child(register_unprivileged)

    assert err == errno.EPERM
    assert "CAP_PERFMON" in text


@pytest.mark.parametrize(
    ("size", "bit", "ok"),
    [(4, 0, True), (4, 31, True), (4, 32, False), (8, 63, True), (8, 64, False)]
    + [(size, 0, False) for size in (1, 2, 3, 5, 6, 7, 9, 128)],
)
def test_enable_sizes_and_bits(data, event_name, size, bit, ok):
    word = uapi.ffi.new("uint64_t[2]")
    address = int(uapi.ffi.cast("uintptr_t", word))
    try:
        uapi.register_ioctl(data.fd, f"{event_name} u32 a", SINGLE, address, bit, size)
    except UserEventsError as exc:
        assert not ok, exc
        assert exc.errno == errno.EINVAL
    else:
        assert ok
        uapi.unregister_ioctl(data.fd, address, bit)


def test_misaligned_enable_address_is_einval(data, event_name):
    word = uapi.ffi.new("uint64_t[2]")
    address = int(uapi.ffi.cast("uintptr_t", word)) + 2

    with pytest.raises(UserEventsError) as caught:
        uapi.register_ioctl(data.fd, f"{event_name} u32 a", SINGLE, address, 0)

    assert caught.value.errno == errno.EINVAL


def test_struct_larger_than_a_page_is_e2big(data, event_name):
    address = _fresh_word()

    with pytest.raises(UserEventsError) as caught:
        uapi.register_ioctl(
            data.fd, f"{event_name} u32 a", SINGLE, address, 0, struct_size=mmap.PAGESIZE + 1
        )

    assert caught.value.errno == errno.E2BIG


def test_read_only_enable_address_is_enomem(data, event_name):
    """The enable-word write faults; the kernel maps that to ENOMEM, not EFAULT."""
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ)
    address = int(uapi.ffi.cast("uintptr_t", uapi.ffi.from_buffer(page)))

    with pytest.raises(UserEventsError) as caught:
        uapi.register_ioctl(data.fd, f"{event_name} u32 a", SINGLE, address, 0)

    assert caught.value.errno == errno.ENOMEM
    assert "enable word" in caught.value.meaning


def test_user_events_max_reached_is_emfile(data, event_name, tracefs):
    existing = data.register(f"{event_name}_existing u32 a", USER_EVENT_REG_MULTI_FORMAT)
    path = "/proc/sys/kernel/user_events_max"
    with open(path) as f:
        saved = f.read().strip()
    active = _active_events(tracefs)
    try:
        with open(path, "w") as f:
            f.write(str(active))
        with pytest.raises(UserEventsError) as caught:
            data.register(f"{event_name} u32 a", USER_EVENT_REG_MULTI_FORMAT)
        again = data.register(existing.command, USER_EVENT_REG_MULTI_FORMAT)
    finally:
        with open(path, "w") as f:
            f.write(saved)

    assert caught.value.errno == errno.EMFILE
    assert "user_events_max" in caught.value.meaning
    assert again.write_index == existing.write_index, "existing events still register"


def _active_events(tracefs) -> int:
    for line in tracefs.status().splitlines():
        if line.startswith("Active:"):
            return int(line.split(":")[1])
    raise AssertionError("no Active: line in user_events_status")


def test_unregister_of_unknown_address_is_enoent(data):
    address = _fresh_word()

    with pytest.raises(UserEventsError) as caught:
        uapi.unregister_ioctl(data.fd, address, 0, "nothing")

    assert caught.value.errno == errno.ENOENT


def test_closed_file_is_ebadf(tracefs, event_name):
    fd = os.open(os.path.join(tracefs.path, "user_events_data"), os.O_RDWR)
    os.close(fd)

    with pytest.raises(UserEventsError) as caught:
        uapi.register_ioctl(fd, f"{event_name} u32 a", SINGLE, _fresh_word(), 0)

    assert caught.value.errno == errno.EBADF


def test_format_file_and_print_fmt(data, event_name, tracefs):
    """Selftest ftrace_test print_fmt, on the reference's example command (§3.1)."""
    registration = data.register(
        f"{event_name} u32 a; __rel_loc char[] msg; char[8] tag; struct s blob 16", SINGLE
    )

    path = f"{tracefs.event_dir('user_events', event_name)}/format"
    with open(path) as f:
        text = f.read()
    fmt = abi.parse_format(text)

    assert fmt.print_fmt == (
        '"a=%u msg=%s tag=%s blob=%llu", REC->a, __get_rel_str(msg), REC->tag, REC->blob'
    )
    assert [(f.name, f.offset, f.size, f.signed) for f in fmt.fields] == [
        ("a", 8, 4, False), ("msg", 12, 4, True), ("tag", 16, 8, True), ("blob", 24, 16, True)
    ]  # fmt: skip
    # user_events never sets a field's declared array length, so the kernel prints "[]" or
    # whatever kmalloc left there (seen: "tag[6525312]"); layout comes from offset and size.
    assert re.search(r"\tfield:__rel_loc char msg\[\d*\];\toffset:12;\tsize:4;", text), text
    assert re.search(r"\tfield:char tag\[\d*\];\toffset:16;\tsize:8;", text), text
    assert registration.write_index >= 0


def test_format_layout_survives_uninitialised_array_lengths(data, event_name, tracefs):
    """Across many registrations some format files print garbage array lengths."""
    declared = set()
    for i in range(100):
        name = f"{event_name}_{i}"
        data.register(f"{name} u32 a; __rel_loc char[] msg; char[8] tag; u64 n{i}", SINGLE)
        with open(f"{tracefs.event_dir('user_events', name)}/format") as f:
            text = f.read()
        declared.update(re.findall(r"field:char tag(\[\d*\])", text))
        fmt = abi.parse_format(text)
        assert [(f.name, f.offset, f.size) for f in fmt.fields] == [
            ("a", 8, 4), ("msg", 12, 4), ("tag", 16, 8), (f"n{i}", 24, 8)
        ]  # fmt: skip
    print(f"declared lengths printed for char[8] tag: {sorted(declared)}")
