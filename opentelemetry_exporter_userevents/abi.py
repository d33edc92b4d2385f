# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The Linux user_events kernel contract, and the only module that knows it.

Everything the kernel defines lives here: the ``user_reg``/``user_unreg`` structs and
their ioctls, the enable words the kernel writes into our memory, the ``writev`` record
layout, the errno values and what they mean, and the tracefs files (``format``,
``enable``, ``user_events_status``).  Exporters, the reader and the CLI sit on top.

References: include/uapi/linux/user_events.h, kernel/trace/trace_events_user.c,
Documentation/trace/user_events.rst (Linux 6.12).
"""

from __future__ import annotations

import errno
import os
import re
import struct
import sys
import threading
from dataclasses import dataclass

from cffi import FFI

from opentelemetry_exporter_userevents import forksafe

try:
    import fcntl
except ImportError:  # not POSIX: UserEventsData reports itself unavailable
    fcntl = None  # type: ignore[assignment]

# --- UAPI constants (include/uapi/linux/user_events.h) ----------------------------------

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


# --- Errors -----------------------------------------------------------------------------

_MEANINGS: dict[str, dict[int, str]] = {
    "register": {
        errno.EADDRINUSE: "this process already registered an event at this enable address and "
        "bit, or a single-format event of this name exists with other fields",
        errno.EINVAL: "the kernel rejected the command or the flags: a malformed field, a ':' in "
        "the name, a command of 512 bytes or more, a bad enable size, bit or alignment, or a "
        "flag this kernel does not know",
        errno.EPERM: "USER_EVENT_REG_PERSIST needs CAP_PERFMON or CAP_SYS_ADMIN",
        errno.EMFILE: "the system-wide limit of tracepoints (sysctl kernel.user_events_max) is "
        "reached",
        errno.ENOMEM: "the kernel could not write the enable word (unmapped or read-only "
        "memory) or is out of memory",
        errno.E2BIG: "struct user_reg is larger than a page or has non-zero trailing bytes",
        errno.EFAULT: "the kernel could not read the registration struct or the command text",
        errno.EBADF: "the user_events_data file is not open",
        errno.ENODEV: "the kernel could not register the trace event",
    },
    "write": {
        errno.EBADF: "no tracer is attached to the event (a listener detached), or the "
        "user_events_data file is not open for writing",
        errno.EINVAL: "the payload is shorter than the event's fixed fields, or the write "
        "index is negative",
        errno.ENOENT: "the write index is not registered on this user_events_data file",
        errno.EFAULT: "a __rel_loc/__data_loc field points outside the record, a string lacks "
        "its NUL terminator, the buffer is unreadable, or the write was shorter than 4 bytes",
        errno.ENOMEM: "the kernel is out of memory",
    },
    "unregister": {
        errno.ENOENT: "this process has no registration at this enable address and bit",
        errno.EINVAL: "struct user_unreg has non-zero reserved fields",
        errno.EBADF: "the user_events_data file is not open",
    },
    "delete": {
        errno.EBUSY: "the event is still in use: registered on an open file, enabled through an "
        "enable word, or attached to a tracer",
        errno.EPERM: "a persistent event can only be deleted with CAP_PERFMON or CAP_SYS_ADMIN",
        errno.ENOENT: "no event of this name exists",
        errno.EBADF: "the user_events_data file is not open",
    },
}


class UserEventsError(OSError):
    """A kernel error from user_events, naming the errno, what it means here and the command."""

    def __init__(self, operation: str, err: int, command: str) -> None:
        meaning = _MEANINGS.get(operation, {}).get(err) or os.strerror(err)
        name = errno.errorcode.get(err, str(err))
        super().__init__(err, f"{operation} {command!r}: {name}: {meaning}")
        self.operation = operation
        self.command = command
        self.meaning = meaning


class UserEventsUnavailable(OSError):
    """user_events cannot be used here: no tracefs, no user_events_data, or no permission."""


# --- Enable words -----------------------------------------------------------------------


class _EnableWords:
    """32-bit words the kernel writes enable bits into, alive for the whole process.

    The kernel writes by virtual address until the registration is unregistered, so the
    memory must never move or be freed while registered: blocks are allocated once and
    never released, and a word is reused only after its registration was unregistered.
    """

    _BLOCK = 1024

    def __init__(self) -> None:
        self._lock = threading.Lock()
        forksafe.register(self)
        self._blocks: list[tuple[object, memoryview, int]] = []
        self._free: list[tuple[int, int]] = []

    def acquire(self) -> tuple[memoryview, int, int]:
        """Return (view of the block as u32 words, index in the block, address of the word)."""
        with self._lock:
            if not self._free:
                block = ffi.new("uint32_t[]", self._BLOCK)
                base = int(ffi.cast("uintptr_t", block))
                view = memoryview(ffi.buffer(block)).cast("I")
                self._blocks.append((block, view, base))
                number = len(self._blocks) - 1
                self._free.extend((number, i) for i in reversed(range(self._BLOCK)))
            number, index = self._free.pop()
        _, view, base = self._blocks[number]
        view[index] = 0
        return view, index, base + 4 * index

    def release(self, address: int) -> None:
        with self._lock:
            for number, (_, _, base) in enumerate(self._blocks):
                if base <= address < base + 4 * self._BLOCK:
                    self._free.append((number, (address - base) // 4))
                    return


_enable_words = _EnableWords()


# --- ioctls -----------------------------------------------------------------------------


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


# --- Registration -----------------------------------------------------------------------


class Registration:
    """One registered event: its write index, tracepoint and enable word.

    Hot paths test ``reg.enable_words[reg.enable_index]`` inline (one memory read); the
    ``enabled`` property is the same read behind a call.
    """

    __slots__ = (
        "_data",
        "_tracepoint",
        "command",
        "enable_address",
        "enable_index",
        "enable_words",
        "flags",
        "index_bytes",
        "name",
        "system",
        "write_index",
        "__weakref__",
    )

    enable_bit = 0

    def __init__(
        self,
        data: UserEventsData,
        command: str,
        flags: int,
        write_index: int,
        words: memoryview,
        index: int,
        address: int,
    ) -> None:
        self._data = data
        self.command = command
        self.flags = flags
        self.name = command.split(" ", 1)[0]
        self.system = (
            USER_EVENTS_MULTI_SYSTEM if flags & USER_EVENT_REG_MULTI_FORMAT else USER_EVENTS_SYSTEM
        )
        self.write_index = write_index
        self.index_bytes = struct.pack("<i", write_index)
        """The write index as the 4 bytes that start every record (``os.writev``'s first part)."""
        self.enable_words = words
        self.enable_index = index
        self.enable_address = address
        self._tracepoint: str | None = None

    @property
    def enabled(self) -> bool:
        """True while any tracer (ftrace in any instance, perf, eBPF) is attached."""
        return self.enable_words[self.enable_index] != 0

    @property
    def registered(self) -> bool:
        return self.enable_address != 0

    @property
    def tracepoint(self) -> str | None:
        """The tracefs event name: ``NAME`` or, multi-format, ``NAME.<hex id>``.

        The kernel does not return the multi-format id, so it is found by matching this
        command's fields against the ``format`` files; None if tracefs is not readable.
        """
        if self._tracepoint is None:
            if self.system == USER_EVENTS_SYSTEM:
                self._tracepoint = self.name
            elif self._data.tracefs is not None:
                self._tracepoint = self._data.tracefs.find_multi_format(self.command)
        return self._tracepoint

    def write(self, *parts: bytes | bytearray | memoryview) -> int:
        """Write one record (the payload ``parts`` concatenated); return the bytes written.

        EBADF means no tracer is attached: callers that checked ``enabled`` first should
        count it as a dropped record (a listener detached between the check and the write).
        """
        try:
            return os.writev(self._data.fd, (self.index_bytes, *parts))
        except OSError as exc:
            raise UserEventsError("write", exc.errno or errno.EIO, self.command) from None

    def unregister(self) -> None:
        """Stop the kernel updating the enable word (it clears it); idempotent."""
        self._data._unregister(self)

    def __repr__(self) -> str:
        return (
            f"Registration({self.system}/{self._tracepoint or self.name}, "
            f"write_index={self.write_index}, enabled={self.enabled})"
        )


class UserEventsData:
    """An open ``user_events_data`` file, where events are registered and written.

    Construction never raises: when user_events cannot be used (not Linux, no tracefs,
    no ``user_events_data``, no permission) ``available`` is False and ``reason`` says
    why, and :meth:`register` raises :class:`UserEventsUnavailable`.
    """

    def __init__(self, tracefs: str | os.PathLike[str] | None = None) -> None:
        self.fd = -1
        self.reason: str | None = None
        self.tracefs: Tracefs | None = None
        self.multi_format: bool | None = None
        """Whether the kernel accepts USER_EVENT_REG_MULTI_FORMAT; None until first tried."""
        self._lock = threading.Lock()
        forksafe.register(self)
        self._registrations: dict[int, Registration] = {}
        self.tracefs, self.fd, self.reason = _open_data(tracefs)

    @property
    def available(self) -> bool:
        return self.fd >= 0

    def register(self, command: str, flags: int = USER_EVENT_REG_MULTI_FORMAT) -> Registration:
        """Register ``command`` ("NAME FIELD; FIELD; ...") and return its registration.

        With USER_EVENT_REG_MULTI_FORMAT (the default) a kernel that answers EINVAL is
        asked again without it: kernels before 6.9 do not know the flag.
        """
        if not self.available:
            raise UserEventsUnavailable(errno.ENODEV, self.reason or "user_events unavailable")
        if len(command.encode()) > MAX_COMMAND_BYTES:
            raise UserEventsError("register", errno.EINVAL, command)
        if flags & USER_EVENT_REG_MULTI_FORMAT and self.multi_format is False:
            flags &= ~USER_EVENT_REG_MULTI_FORMAT
        words, index, address = _enable_words.acquire()
        try:
            try:
                write_index = register_ioctl(self.fd, command, flags, address, 0)
            except UserEventsError as exc:
                retry = flags & USER_EVENT_REG_MULTI_FORMAT and self.multi_format is None
                if exc.errno != errno.EINVAL or not retry:
                    raise
                # Bad command text fails again here, with the same EINVAL.
                flags &= ~USER_EVENT_REG_MULTI_FORMAT
                write_index = register_ioctl(self.fd, command, flags, address, 0)
                self.multi_format = False
            else:
                if flags & USER_EVENT_REG_MULTI_FORMAT:
                    self.multi_format = True
        except BaseException:
            _enable_words.release(address)
            raise
        registration = Registration(self, command, flags, write_index, words, index, address)
        with self._lock:
            self._registrations[address] = registration
        return registration

    def _unregister(self, registration: Registration) -> None:
        with self._lock:
            address = registration.enable_address
            if not address or self._registrations.get(address) is not registration:
                return
            del self._registrations[address]
            registration.enable_address = 0
        try:
            unregister_ioctl(self.fd, address, registration.enable_bit, registration.command)
        except UserEventsError as exc:
            if exc.errno != errno.ENOENT:
                raise  # the kernel may still write the word: never reuse it
        _enable_words.release(address)

    def delete(self, name: str) -> None:
        """Delete the events registered as ``name`` (needs no other user of them)."""
        if not self.available:
            raise UserEventsUnavailable(errno.ENODEV, self.reason or "user_events unavailable")
        delete_ioctl(self.fd, name)

    def close(self) -> None:
        """Unregister every registration of this object, then close the file; idempotent."""
        with self._lock:
            registrations = list(self._registrations.values())
        for registration in registrations:
            try:
                registration.unregister()
            except UserEventsError:
                pass
        fd, self.fd = self.fd, -1
        if fd >= 0:
            if self.reason is None:
                self.reason = "closed"
            try:
                os.close(fd)
            except OSError:  # other code closed it already: nothing is left to close
                pass

    def __enter__(self) -> UserEventsData:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return f"UserEventsData({self.tracefs.path if self.tracefs else None!r}, {state})"


def _open_data(
    path: str | os.PathLike[str] | None,
) -> tuple[Tracefs | None, int, str | None]:
    if not sys.platform.startswith("linux"):
        return None, -1, f"user_events needs Linux, this is {sys.platform}"
    tracefs = Tracefs(os.fspath(path)) if path is not None else Tracefs.find()
    if tracefs is None:
        return (
            None,
            -1,
            (
                "tracefs is not mounted (looked in /proc/mounts, /sys/kernel/tracing and "
                "/sys/kernel/debug/tracing); as root: mount -t tracefs nodev /sys/kernel/tracing"
            ),
        )
    data_path = os.path.join(tracefs.path, "user_events_data")
    try:
        fd = os.open(data_path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            reason = (
                f"{data_path} does not exist: this kernel ({os.uname().release}) has no "
                "user_events (it needs CONFIG_USER_EVENTS=y, Linux 6.4 or later)"
            )
        elif exc.errno in (errno.EACCES, errno.EPERM):
            reason = (
                f"no permission to open {data_path} for writing: it is root-owned, mode 0640 "
                "by default; run as root or grant this user's group read-write access to it "
                f"and search (x) access to {tracefs.path} (see the README)"
            )
        else:
            reason = f"cannot open {data_path}: {exc.strerror}"
        return tracefs, -1, reason
    return tracefs, fd, None


# --- tracefs ----------------------------------------------------------------------------

_FIELD_LINE = re.compile(
    r"^\s*field:(?P<decl>[^;]*);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);"
    r"\s*signed:(?P<signed>-?\d+);"
)
_ARRAY_SUFFIX = re.compile(r"\[[^\]]*\]")


@dataclass(frozen=True)
class FormatField:
    """One field of an event ``format`` file; layout comes from offset and size only."""

    name: str
    type: str
    """The declaration without the name, array brackets removed (e.g. ``__rel_loc char``)."""
    offset: int
    size: int
    signed: bool
    is_array: bool


@dataclass(frozen=True)
class EventFormat:
    """A parsed tracefs ``format`` file."""

    name: str
    id: int
    common_fields: tuple[FormatField, ...]
    fields: tuple[FormatField, ...]
    print_fmt: str

    def field(self, name: str) -> FormatField:
        for field in self.fields:
            if field.name == name:
                return field
        raise KeyError(name)


def parse_format(text: str) -> EventFormat:
    """Parse a ``format`` file; raises ValueError on text that is not one.

    Declared array lengths are ignored (user_events never sets them, Linux 6.12
    trace_events.c f_show), so the name is the last token without ``[...]``.
    """
    name = None
    event_id = None
    print_fmt = ""
    common: list[FormatField] = []
    fields: list[FormatField] = []
    target = common
    in_format = False
    for line in text.splitlines():
        if line.startswith("name:"):
            name = line[5:].strip()
        elif line.startswith("ID:"):
            event_id = int(line[3:].strip())
        elif line.startswith("format:"):
            in_format = True
        elif line.startswith("print fmt:"):
            print_fmt = line[len("print fmt:") :].strip()
            in_format = False
        elif in_format and not line.strip():
            target = fields
        elif in_format:
            match = _FIELD_LINE.match(line)
            if match is None:
                raise ValueError(f"unexpected line in format file: {line!r}")
            target.append(_parse_field(match))
    if name is None or event_id is None:
        raise ValueError("format file has no name or ID line")
    return EventFormat(name, event_id, tuple(common), tuple(fields), print_fmt)


def _parse_field(match: re.Match[str]) -> FormatField:
    decl = match["decl"].strip()
    head, _, last = decl.rpartition(" ")
    is_array = "[" in decl
    if not head:  # "u32 " registers a field with an empty name, shown as "u32 ;"
        head, last = decl, ""
    return FormatField(
        name=_ARRAY_SUFFIX.sub("", last),
        type=" ".join(_ARRAY_SUFFIX.sub("", head).split()),
        offset=int(match["offset"]),
        size=int(match["size"]),
        signed=match["signed"] not in ("0",),
        is_array=is_array,
    )


_SCALAR_SIZES = {
    "s8": 1, "u8": 1, "char": 1, "unsigned char": 1,
    "s16": 2, "u16": 2, "short": 2, "unsigned short": 2,
    "s32": 4, "u32": 4, "int": 4, "unsigned int": 4,
    "s64": 8, "u64": 8,
}  # fmt: skip


def command_fields(command: str) -> list[tuple[str, str, int]]:
    """The (type, name, size) of each field of a registration command, as tracefs shows them.

    Raises ValueError for text the kernel would not accept.
    """
    _, _, args = command.partition(" ")
    result = []
    for raw in args.split(";"):
        tokens = raw.strip().split(" ")
        if tokens == [""]:
            continue
        if tokens[0] == "struct":  # struct TYPE NAME SIZE
            if len(tokens) != 4:
                raise ValueError(f"struct field needs a type, a name and a size: {raw!r}")
            ftype, fname = " ".join(tokens[:2]), tokens[2]
        elif len(tokens) >= 2:
            ftype, fname = " ".join(tokens[:-1]), tokens[-1]
        else:
            raise ValueError(f"field without a name: {raw!r}")
        base = _ARRAY_SUFFIX.sub("", ftype)
        if ftype.startswith(("__data_loc ", "__rel_loc ")):
            size = 4
        elif ftype.startswith("struct "):
            size = int(tokens[3])
        elif base != ftype:
            size = int(ftype[len(base) + 1 : -1], 0)
        elif ftype in _SCALAR_SIZES:
            size = _SCALAR_SIZES[ftype]
        else:
            raise ValueError(f"unknown field type: {ftype!r}")
        result.append((base, fname, size))
    return result


class Tracefs:
    """A tracefs mount: event directories, format files, enable switches, status."""

    CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def find(cls, mounts: str = "/proc/mounts") -> Tracefs | None:
        """Locate tracefs from ``mounts`` (tracefs, or debugfs's ``tracing``), else the usual
        paths; None if none looks like tracefs."""
        mounted: list[str] = []
        try:
            with open(mounts, encoding="utf-8", errors="replace") as file:
                for line in file:
                    parts = line.split()
                    if len(parts) < 3:
                        continue
                    point = parts[1].replace("\\040", " ")
                    if parts[2] == "tracefs":
                        mounted.insert(0, point)
                    elif parts[2] == "debugfs":
                        mounted.append(os.path.join(point, "tracing"))
        except OSError:
            pass
        # tracefs's root is 0700 by default: an unprivileged user can see a mount point but
        # not its files, so a mounted tracefs counts even when its files cannot be read.
        for candidate in mounted:
            if os.path.isdir(candidate):
                return cls(candidate)
        for candidate in cls.CANDIDATES:
            if _exists(os.path.join(candidate, "README")) or _exists(
                os.path.join(candidate, "user_events_data")
            ):
                return cls(candidate)
        return None

    def event_dir(self, system: str, name: str, instance: str | None = None) -> str:
        root = os.path.join(self.path, "instances", instance) if instance else self.path
        return os.path.join(root, "events", system, name)

    def read_format(self, system: str, name: str) -> EventFormat:
        with open(os.path.join(self.event_dir(system, name), "format"), encoding="utf-8") as f:
            return parse_format(f.read())

    def event_id(self, system: str, name: str) -> int:
        with open(os.path.join(self.event_dir(system, name), "id"), encoding="ascii") as f:
            return int(f.read())

    def events(self, system: str) -> list[str]:
        """Names of the events of ``system``; empty if there are none (or no such system)."""
        try:
            entries = os.listdir(os.path.join(self.path, "events", system))
        except FileNotFoundError:
            return []
        return sorted(e for e in entries if e not in ("enable", "filter"))

    def multi_format_versions(self, name: str) -> list[str]:
        """Every ``user_events_multi/<name>.<hex id>`` tracepoint, oldest id first."""
        pattern = re.compile(rf"^{re.escape(name)}\.([0-9a-fA-F]+)$")
        found = []
        for event in self.events(USER_EVENTS_MULTI_SYSTEM):
            match = pattern.match(event)
            if match:
                found.append((int(match[1], 16), event))
        return [event for _, event in sorted(found)]

    def find_multi_format(self, command: str) -> str | None:
        """The multi-format tracepoint whose format file has exactly ``command``'s fields."""
        try:
            wanted = command_fields(command)
        except (ValueError, IndexError):
            return None
        name = command.split(" ", 1)[0]
        matches = []
        for event in self.multi_format_versions(name):
            try:
                fmt = self.read_format(USER_EVENTS_MULTI_SYSTEM, event)
            except (OSError, ValueError):
                continue
            if [(f.type, f.name, f.size) for f in fmt.fields] == wanted:
                matches.append(event)
        return matches[-1] if matches else None

    def set_enabled(
        self, system: str, name: str, enabled: bool, instance: str | None = None
    ) -> None:
        """Attach (or detach) ftrace to an event, in the global buffer or an instance."""
        with open(os.path.join(self.event_dir(system, name, instance), "enable"), "w") as f:
            f.write("1" if enabled else "0")

    def status(self) -> str:
        """The text of ``user_events_status``: each tracepoint and who uses it."""
        with open(os.path.join(self.path, "user_events_status"), encoding="utf-8") as f:
            return f.read()

    # --- instances: private buffers for readers (Documentation/trace/ftrace.rst) ---------

    def instance_dir(self, instance: str) -> str:
        return os.path.join(self.path, "instances", instance)

    def instances(self) -> list[str]:
        """Names of the tracefs instances (each has its own ring buffer)."""
        try:
            return sorted(os.listdir(os.path.join(self.path, "instances")))
        except FileNotFoundError:
            return []

    def create_instance(self, instance: str) -> None:
        """``mkdir instances/<instance>``: a ring buffer of its own, every event disabled."""
        os.mkdir(self.instance_dir(instance))

    def remove_instance(self, instance: str) -> None:
        """``rmdir instances/<instance>``: the kernel disables its events and frees its buffer.
        EBUSY while a file of the instance is open."""
        os.rmdir(self.instance_dir(instance))

    def set_filter(self, system: str, name: str, expression: str, instance: str) -> None:
        """Set an event's filter in an instance; ValueError with the kernel's reason if the
        kernel rejects it (e.g. a field the event does not have)."""
        path = os.path.join(self.event_dir(system, name, instance), "filter")
        try:
            with open(path, "w") as f:
                f.write(expression)
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    reason = " ".join(f.read().split())
            except OSError:
                reason = ""
            message = f"the kernel rejected filter {expression!r} for {name}: {reason}"
            raise ValueError(message) from None

    def cpus(self, instance: str) -> list[int]:
        """The CPUs that have a ring buffer in the instance (``per_cpu/cpuN``)."""
        entries = os.listdir(os.path.join(self.instance_dir(instance), "per_cpu"))
        return sorted(int(e[3:]) for e in entries if e.startswith("cpu") and e[3:].isdigit())

    def trace_pipe_raw(self, instance: str, cpu: int) -> str:
        """The consuming binary reader of one CPU's ring buffer: one sub-buffer per read."""
        return os.path.join(self.instance_dir(instance), "per_cpu", f"cpu{cpu}", "trace_pipe_raw")

    def cpu_stats(self, instance: str, cpu: int) -> dict[str, int]:
        """The integer lines of ``per_cpu/cpuN/stats`` (entries, overrun, dropped events...)."""
        path = os.path.join(self.instance_dir(instance), "per_cpu", f"cpu{cpu}", "stats")
        stats = {}
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                value = value.strip()
                if value.isdigit():
                    stats[key.strip()] = int(value)
        return stats

    def set_buffer_size_kb(self, instance: str, size_kb: int) -> None:
        """The per-CPU ring buffer size of an instance, in KiB (the kernel rounds up)."""
        with open(os.path.join(self.instance_dir(instance), "buffer_size_kb"), "w") as f:
            f.write(str(size_kb))

    def header_page(self) -> str:
        """``events/header_page``: the layout of a ring-buffer sub-buffer."""
        with open(os.path.join(self.path, "events", "header_page"), encoding="ascii") as f:
            return f.read()

    def sub_buffer_size(self, instance: str) -> int | None:
        """The instance's sub-buffer size in bytes (``buffer_subbuf_size_kb``, Linux 6.8+);
        None on older kernels, where it is ``header_page``'s."""
        path = os.path.join(self.instance_dir(instance), "buffer_subbuf_size_kb")
        try:
            with open(path, encoding="ascii") as f:
                return int(f.read()) * 1024
        except (OSError, ValueError):
            return None


def _exists(path: str) -> bool:
    try:
        os.stat(path)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def write_record(fd: int, write_index: int, *parts: bytes | bytearray | memoryview) -> int:
    """One raw ``writev`` of ``[s32 write_index][payload...]``; errors stay plain OSError."""
    return os.writev(fd, [struct.pack("<i", write_index), *parts])
