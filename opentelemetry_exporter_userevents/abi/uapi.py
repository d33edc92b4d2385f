# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The user_events UAPI: flags, the ``user_reg``/``user_unreg`` structs and their ioctls.

The three ioctls are low level on purpose (any address, bit, size and struct size), so
that the kernel's own edge cases can be tested; :class:`~.user_events.UserEventsData`
is the interface to use. References: include/uapi/linux/user_events.h,
kernel/trace/trace_events_user.c (Linux 6.12).
"""

from __future__ import annotations

import errno
import struct

from cffi import FFI

from opentelemetry_exporter_userevents.abi.errors import UserEventsError

try:
    import fcntl
except ImportError:  # not POSIX: UserEventsData reports itself unavailable
    fcntl = None  # type: ignore[assignment]

USER_EVENT_REG_PERSIST = 1 << 0
"""Keep the event after its last user is gone (needs CAP_PERFMON or CAP_SYS_ADMIN)."""
USER_EVENT_REG_MULTI_FORMAT = 1 << 1
"""One tracepoint per distinct (name, format): ``user_events_multi/<name>.<hex id>``."""
USER_EVENT_REG_MAX = 1 << 2

USER_EVENTS_SYSTEM = "user_events"
USER_EVENTS_MULTI_SYSTEM = "user_events_multi"

# _IOWR('*', 0, struct user_reg *), _IOW('*', 1, char *), _IOW('*', 2, struct user_unreg *):
# the size field is sizeof(pointer), not sizeof(struct).
_PTR_SIZE = struct.calcsize("P")
_IOC_WRITE, _IOC_READ = 1, 2


def _ioc(direction: int, nr: int) -> int:
    return (direction << 30) | (_PTR_SIZE << 16) | (ord("*") << 8) | nr


DIAG_IOCSREG = _ioc(_IOC_READ | _IOC_WRITE, 0)
DIAG_IOCSDEL = _ioc(_IOC_WRITE, 1)
DIAG_IOCSUNREG = _ioc(_IOC_WRITE, 2)

MAX_COMMAND_BYTES = 511
"""The command text, without its NUL, must be shorter than MAX_EVENT_DESC (512)."""
MAX_FIELD_ARRAY_SIZE = 1024
TRACE_ENTRY_SIZE = 8
"""``struct trace_entry`` (common_type, flags, preempt_count, pid) precedes every payload."""

ffi = FFI()
ffi.cdef(
    """
    struct user_reg {
        uint32_t size;
        uint8_t  enable_bit;
        uint8_t  enable_size;
        uint16_t flags;
        uint64_t enable_addr;
        uint64_t name_args;
        uint32_t write_index;
    };
    struct user_unreg {
        uint32_t size;
        uint8_t  disable_bit;
        uint8_t  __reserved;
        uint16_t __reserved2;
        uint64_t disable_addr;
    };
    """,
    packed=True,
)
assert ffi.sizeof("struct user_reg") == 28 and ffi.sizeof("struct user_unreg") == 16


def rel_loc(size: int, offset: int) -> int:
    """A ``__rel_loc`` value: data ``offset`` bytes after the end of the 4-byte loc field."""
    return (size << 16) | offset


def data_loc(size: int, offset: int) -> int:
    """A ``__data_loc`` value: ``offset`` counts from the record start, trace_entry included."""
    return (size << 16) | offset


def register_ioctl(
    fd: int,
    command: str | bytes,
    flags: int,
    enable_address: int,
    enable_bit: int,
    enable_size: int = 4,
    struct_size: int | None = None,
) -> int:
    """DIAG_IOCSREG: register ``command`` with its enable bit; return the write index.

    Low level on purpose (any address, bit, size and struct size), so that the kernel's
    own edge cases can be tested; use :meth:`UserEventsData.register` instead.
    """
    text = command.encode() if isinstance(command, str) else command
    name_args = ffi.new("char[]", text)
    size = 28 if struct_size is None else struct_size
    raw = ffi.new("char[]", max(size, 28))
    reg = ffi.cast("struct user_reg *", raw)
    reg.size = size
    reg.enable_bit = enable_bit
    reg.enable_size = enable_size
    reg.flags = flags
    reg.enable_addr = enable_address
    reg.name_args = int(ffi.cast("uintptr_t", name_args))
    buffer = ffi.buffer(raw)
    try:
        fcntl.ioctl(fd, DIAG_IOCSREG, buffer, True)
    except OSError as exc:
        raise UserEventsError("register", exc.errno or errno.EIO, _text(command)) from None
    return int(reg.write_index)


def unregister_ioctl(fd: int, enable_address: int, enable_bit: int, command: str = "") -> None:
    """DIAG_IOCSUNREG: the kernel stops updating this enable bit and clears it."""
    unreg = ffi.new("struct user_unreg *")
    unreg.size = ffi.sizeof("struct user_unreg")
    unreg.disable_bit = enable_bit
    unreg.disable_addr = enable_address
    try:
        fcntl.ioctl(fd, DIAG_IOCSUNREG, ffi.buffer(unreg), True)
    except OSError as exc:
        raise UserEventsError("unregister", exc.errno or errno.EIO, command) from None


def delete_ioctl(fd: int, name: str) -> None:
    """DIAG_IOCSDEL: delete every event (single and multi-format) registered as ``name``."""
    try:
        fcntl.ioctl(fd, DIAG_IOCSDEL, name.encode() + b"\0")
    except OSError as exc:
        raise UserEventsError("delete", exc.errno or errno.EIO, name) from None


def _text(command: str | bytes) -> str:
    return command if isinstance(command, str) else command.decode("utf-8", "replace")
