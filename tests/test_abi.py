# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The ABI layer without a kernel: layouts, parsing, discovery, unavailability, fallback."""

import errno
import os

import pytest

from opentelemetry_exporter_userevents import abi
from opentelemetry_exporter_userevents.abi import (
    USER_EVENT_REG_MULTI_FORMAT,
    UserEventsData,
    UserEventsError,
    UserEventsUnavailable,
    uapi,
    user_events,
)
from opentelemetry_exporter_userevents.abi import tracefs as tracefs_module
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs

FORMAT = """name: ev.1f
ID: 441
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:u32 a;\toffset:8;\tsize:4;\tsigned:0;
\tfield:__rel_loc char msg[];\toffset:12;\tsize:4;\tsigned:1;
\tfield:char tag[1234567];\toffset:16;\tsize:8;\tsigned:1;
\tfield:struct s blob;\toffset:24;\tsize:16;\tsigned:1;
\tfield:__data_loc char[] text;\toffset:40;\tsize:4;\tsigned:1;
\tfield:u32 ;\toffset:44;\tsize:4;\tsigned:0;

print fmt: "a=%u msg=%s", REC->a, __get_rel_str(msg)
"""


def test_ioctl_numbers_and_struct_sizes_match_the_uapi():
    assert uapi.DIAG_IOCSREG == 0xC0082A00
    assert uapi.DIAG_IOCSDEL == 0x40082A01
    assert uapi.DIAG_IOCSUNREG == 0x40082A02
    assert uapi.ffi.sizeof("struct user_reg") == 28
    assert uapi.ffi.offsetof("struct user_reg", "write_index") == 24
    assert uapi.ffi.sizeof("struct user_unreg") == 16


def test_dynamic_locations():
    assert uapi.rel_loc(11, 0) == 11 << 16
    assert uapi.data_loc(5, 12) == (5 << 16) | 12


def test_parse_format_takes_layout_from_offset_and_size():
    fmt = abi.parse_format(FORMAT)

    assert (fmt.name, fmt.id) == ("ev.1f", 441)
    assert [f.name for f in fmt.common_fields] == [
        "common_type", "common_flags", "common_preempt_count", "common_pid"
    ]  # fmt: skip
    assert [(f.type, f.name, f.offset, f.size, f.is_array) for f in fmt.fields] == [
        ("u32", "a", 8, 4, False),
        ("__rel_loc char", "msg", 12, 4, True),
        ("char", "tag", 16, 8, True),  # the declared length is ignored
        ("struct s", "blob", 24, 16, False),
        ("__data_loc char", "text", 40, 4, True),
        ("u32", "", 44, 4, False),
    ]
    assert fmt.field("blob").signed is True
    assert fmt.print_fmt.startswith('"a=%u')


@pytest.mark.parametrize("text", ["", "name: x\n", "name: x\nID: 1\nformat:\n\tbogus\n"])
def test_parse_format_rejects_other_text(text):
    with pytest.raises(ValueError):
        abi.parse_format(text)


def test_command_fields_as_tracefs_shows_them():
    fields = abi.command_fields(
        "ev u32 a;u64 b; __rel_loc char[] msg; __data_loc unsigned char[] raw; "
        "char[0x14] tag; unsigned short s; struct s blob 16;"
    )

    assert fields == [
        ("u32", "a", 4), ("u64", "b", 8), ("__rel_loc char", "msg", 4),
        ("__data_loc unsigned char", "raw", 4), ("char", "tag", 20),
        ("unsigned short", "s", 2), ("struct s", "blob", 16),
    ]  # fmt: skip


@pytest.mark.parametrize("command", ["ev u32", "ev long a", "ev struct s a"])
def test_command_fields_rejects_what_the_kernel_rejects(command):
    with pytest.raises(ValueError):
        abi.command_fields(command)


def _mounts(tmp_path, lines):
    path = tmp_path / "mounts"
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_find_tracefs_prefers_the_mounted_tracefs(tmp_path):
    tracing = tmp_path / "my tracing"
    tracing.mkdir()
    mounts = _mounts(tmp_path, [
        "proc /proc proc rw 0 0",
        f"nodev {str(tracing).replace(' ', chr(92) + '040')} tracefs rw 0 0",
    ])  # fmt: skip

    assert Tracefs.find(mounts).path == str(tracing)


def test_find_tracefs_under_debugfs(tmp_path):
    debug = tmp_path / "debug"
    (debug / "tracing").mkdir(parents=True)
    (debug / "tracing" / "README").write_text("")

    found = Tracefs.find(_mounts(tmp_path, [f"debugfs {debug} debugfs rw 0 0"]))

    assert found is not None and found.path == str(debug / "tracing")


def test_find_tracefs_none(tmp_path, monkeypatch):
    monkeypatch.setattr(Tracefs, "CANDIDATES", (str(tmp_path / "nope"),))

    assert Tracefs.find(_mounts(tmp_path, ["proc /proc proc rw 0 0"])) is None
    assert Tracefs.find(str(tmp_path / "no-such-mounts")) is None


def test_unavailable_without_tracefs(tmp_path, monkeypatch):
    monkeypatch.setattr(Tracefs, "find", classmethod(lambda cls, mounts="": None))
    monkeypatch.setattr(tracefs_module, "find_data_file", lambda mounts="": None)

    data = UserEventsData()

    assert not data.available
    assert "neither tracefs nor a bind-mounted user_events_data" in data.reason
    assert "OTEL_EXPORTER_USER_EVENTS_DATA" in data.reason
    with pytest.raises(UserEventsUnavailable, match="neither tracefs nor"):
        data.register("ev u32 a")
    data.close()


def test_unavailable_without_user_events_data(tmp_path):
    data = UserEventsData(tmp_path)

    assert not data.available
    assert "CONFIG_USER_EVENTS" in data.reason and "user_events_data" in data.reason


def test_unavailable_without_permission(tmp_path, monkeypatch):
    def denied(path, flags):
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(tracefs_module.os, "open", denied)

    data = UserEventsData(tmp_path)

    assert not data.available
    assert "no permission" in data.reason and "0640" in data.reason


class FakeKernel:
    """Stands in for the two ioctls: which commands and flags were asked, what to answer."""

    def __init__(self, refuse_multi: bool = False, refuse: bool = False) -> None:
        self.calls: list[tuple[str, int]] = []
        self.refuse_multi = refuse_multi
        self.refuse = refuse
        self.unregistered: list[int] = []

    def register(self, fd, command, flags, address, bit, size=4, struct_size=None):
        self.calls.append((command, flags))
        if self.refuse or (self.refuse_multi and flags & USER_EVENT_REG_MULTI_FORMAT):
            raise UserEventsError("register", errno.EINVAL, command)
        return len(self.calls) - 1

    def unregister(self, fd, address, bit, command=""):
        self.unregistered.append(address)


@pytest.fixture
def fake_data(tmp_path, monkeypatch):
    (tmp_path / "user_events_data").write_bytes(b"")

    def make(kernel: FakeKernel) -> UserEventsData:
        monkeypatch.setattr(uapi, "register_ioctl", kernel.register)
        monkeypatch.setattr(uapi, "unregister_ioctl", kernel.unregister)
        return UserEventsData(tmp_path)

    return make


def test_multi_format_einval_retries_without_the_flag_once(fake_data):
    kernel = FakeKernel(refuse_multi=True)
    data = fake_data(kernel)

    first = data.register("ev u32 a")
    second = data.register("ev2 u32 a")

    assert [flags for _, flags in kernel.calls] == [USER_EVENT_REG_MULTI_FORMAT, 0, 0]
    assert data.multi_format is False
    assert (first.system, first.tracepoint) == ("user_events", "ev")
    assert second.system == "user_events"
    data.close()


def test_bad_command_is_not_mistaken_for_an_old_kernel(fake_data):
    kernel = FakeKernel(refuse=True)
    data = fake_data(kernel)

    with pytest.raises(UserEventsError) as caught:
        data.register("ev bogus")

    assert caught.value.errno == errno.EINVAL and caught.value.command == "ev bogus"
    assert data.multi_format is None
    assert len(kernel.calls) == 2
    data.close()


def test_command_longer_than_511_bytes_is_refused_before_the_kernel(fake_data):
    kernel = FakeKernel()
    data = fake_data(kernel)

    with pytest.raises(UserEventsError) as caught:
        data.register("e" * 512)

    assert caught.value.errno == errno.EINVAL and kernel.calls == []
    data.close()


def test_close_unregisters_each_registration_once(fake_data):
    kernel = FakeKernel()
    data = fake_data(kernel)
    registrations = [data.register(f"ev{i} u32 a") for i in range(3)]
    addresses = [r.enable_address for r in registrations]
    registrations[0].unregister()

    data.close()
    data.close()

    assert sorted(kernel.unregistered) == sorted(addresses)
    assert not data.available and all(not r.registered for r in registrations)


def test_error_names_errno_meaning_and_command():
    error = UserEventsError("write", errno.EBADF, "ev u32 a")

    assert error.errno == errno.EBADF
    assert str(error) == (
        "[Errno 9] write 'ev u32 a': EBADF: no tracer is attached to the event (a listener "
        "detached), or the user_events_data file is not open for writing"
    )
    assert isinstance(error, OSError)


@pytest.mark.parametrize(
    "err",
    [
        errno.EADDRINUSE,
        errno.EINVAL,
        errno.EPERM,
        errno.EMFILE,
        errno.ENOMEM,
        errno.E2BIG,
        errno.EFAULT,
        errno.EBADF,
    ],  # fmt: skip
)
def test_every_registration_errno_has_a_meaning(err):
    error = UserEventsError("register", err, "ev")

    assert error.meaning != os.strerror(err)
    assert errno.errorcode[err] in str(error)


def test_enable_words_are_aligned_distinct_and_reused_after_release():
    words = user_events._EnableWords()
    taken = [words.acquire() for _ in range(words._BLOCK + 2)]
    addresses = [address for _, address in taken]

    assert len(set(addresses)) == len(addresses)
    assert all(address % 8 in (0, 4) for address in addresses)
    word, address = taken[5]
    uapi.ffi.cast("uint32_t *", address)[0] = 7  # what the kernel would do
    assert word[0] == 7
    words.release(address)
    again_word, again_address = words.acquire()
    assert again_address == address and again_word[0] == 0
