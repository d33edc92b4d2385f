# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Registering user_events and writing records: enable words, registrations, writes.

The kernel writes each registration's enable bit into our memory while a tracer (ftrace,
perf, eBPF) is attached; writers read it (one memory read) before doing any work, and
write a record with one ``writev`` of ``[s32 write index][payload]``.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import time
import weakref
from collections.abc import Sequence

from opentelemetry_exporter_userevents import _forksafe
from opentelemetry_exporter_userevents.abi import uapi
from opentelemetry_exporter_userevents.abi.errors import UserEventsError, UserEventsUnavailable
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs, open_user_events_data
from opentelemetry_exporter_userevents.abi.uapi import (
    MAX_COMMAND_BYTES,
    USER_EVENT_REG_MULTI_FORMAT,
    USER_EVENTS_MULTI_SYSTEM,
    USER_EVENTS_SYSTEM,
    ffi,
)

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
        _forksafe.register(self)
        self._blocks: list[tuple[object, memoryview, int]] = []
        self._free: list[tuple[int, int]] = []

    def acquire(self) -> tuple[memoryview, int]:
        """Return (a one-element view of a zeroed word, its address)."""
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
        word = view[index : index + 1]
        word[0] = 0
        return word, base + 4 * index

    def release(self, address: int) -> None:
        with self._lock:
            for number, (_, _, base) in enumerate(self._blocks):
                if base <= address < base + 4 * self._BLOCK:
                    self._free.append((number, (address - base) // 4))
                    return


_enable_words = _EnableWords()


# --- Registration -----------------------------------------------------------------------


class Registration:
    """One registered event: its write index, tracepoint and enable word.

    Hot paths take ``word = enable_word(reg)`` once and test ``word[0]`` inline (one
    memory read); the ``enabled`` property is the same read behind a call.
    """

    __slots__ = (
        "_data",
        "_tracepoint",
        "command",
        "enable_address",
        "enable_word",
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
        word: memoryview,
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
        self.enable_word = word
        """A one-element view of the enable word: ``enable_word[0]`` is the word."""
        self.enable_address = address
        self._tracepoint: str | None = None

    @property
    def enabled(self) -> bool:
        """True while any tracer (ftrace in any instance, perf, eBPF) is attached."""
        return self.enable_word[0] != 0

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
        It also means the file was closed (:attr:`UserEventsData.closed`): a write never
        reaches a descriptor the object no longer owns, because :meth:`UserEventsData.close`
        waits for writes in flight and the ones after it never use the number.
        """
        data = self._data
        writing = data._writing
        writing.append(None)  # in flight first, then the check: close() does the converse
        try:
            if data.closed:
                raise UserEventsError("write", errno.EBADF, self.command)
            return os.writev(data.fd, (self.index_bytes, *parts))
        except OSError as exc:
            raise UserEventsError("write", exc.errno or errno.EIO, self.command) from None
        finally:
            writing.pop()

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

    def __init__(
        self,
        tracefs: str | os.PathLike[str] | None = None,
        data_path: str | os.PathLike[str] | None = None,
    ) -> None:
        """``data_path``: the ``user_events_data`` file itself (bind-mounted alone in a
        container); else the one of ``tracefs`` or of the mounted tracefs, else one found
        bind-mounted alone in ``/proc/mounts``."""
        self.fd = -1
        self.reason: str | None = None
        self.tracefs: Tracefs | None = None
        self.multi_format: bool | None = None
        """Whether the kernel accepts USER_EVENT_REG_MULTI_FORMAT; None until first tried."""
        self._lock = threading.Lock()
        _forksafe.register(self)
        self.closed = False
        """True from the start of :meth:`close`: writes then fail with EBADF."""
        self._writing: list[None] = []
        """One entry per write in flight (list appends and pops are atomic: no lock on the
        write path, which costs a tenth of a microsecond instead of half of one)."""
        _all_data.add(self)
        self._registrations: dict[int, Registration] = {}
        self._shared_words: list[tuple[int, list[tuple[int, str]]]] = []  # address, enablers
        self.tracefs, self.fd, self.reason = open_user_events_data(tracefs, data_path)

    @property
    def available(self) -> bool:
        return self.fd >= 0

    def _wait_for_writes(self) -> None:
        """Mark closed, then wait until no write is in flight. A write enters, then checks
        ``closed``; this marks, then checks the writes in flight: either the write sees
        ``closed`` and leaves the descriptor alone, or this sees the write and waits."""
        self.closed = True
        while self._writing:
            time.sleep(0.0002)

    def register(
        self,
        command: str,
        flags: int = USER_EVENT_REG_MULTI_FORMAT,
        single_format_command: str | None = None,
    ) -> Registration:
        """Register ``command`` ("NAME FIELD; FIELD; ...") and return its registration.

        With USER_EVENT_REG_MULTI_FORMAT (the default) a kernel that answers EINVAL is
        asked again without it (kernels before 6.9 do not know the flag), with
        ``single_format_command`` if given: single-format events are one per name, so a
        caller that versions its formats gives each version a name of its own there. A bad
        command fails the second time with the same EINVAL, and is never taken for an old
        kernel.
        """
        if not self.available:
            raise UserEventsUnavailable(errno.ENODEV, self.reason or "user_events unavailable")
        fallback = single_format_command or command
        if flags & USER_EVENT_REG_MULTI_FORMAT and self.multi_format is False:
            flags &= ~USER_EVENT_REG_MULTI_FORMAT
            command = fallback
        if len(command.encode()) > MAX_COMMAND_BYTES:
            raise UserEventsError("register", errno.EINVAL, command)
        word, address = _enable_words.acquire()
        try:
            try:
                write_index = uapi.register_ioctl(self.fd, command, flags, address, 0)
            except UserEventsError as exc:
                retry = flags & USER_EVENT_REG_MULTI_FORMAT and self.multi_format is None
                if exc.errno != errno.EINVAL or not retry:
                    raise
                flags &= ~USER_EVENT_REG_MULTI_FORMAT
                command = fallback
                if len(command.encode()) > MAX_COMMAND_BYTES:
                    raise UserEventsError("register", errno.EINVAL, command) from None
                write_index = uapi.register_ioctl(self.fd, command, flags, address, 0)
                self.multi_format = False
            else:
                if flags & USER_EVENT_REG_MULTI_FORMAT:
                    self.multi_format = True
        except BaseException:
            _enable_words.release(address)
            raise
        registration = Registration(self, command, flags, write_index, word, address)
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
            uapi.unregister_ioctl(self.fd, address, registration.enable_bit, registration.command)
        except UserEventsError as exc:
            if exc.errno != errno.ENOENT:
                raise  # the kernel may still write the word: never reuse it
        _enable_words.release(address)

    def shared_enable_word(self, registrations: Sequence[Registration | None]) -> memoryview:
        """One word for several events: bit ``i`` is the enable bit of ``registrations[i]``,
        so ``word[0]`` is non-zero while any of them is listened to, and a hot path that
        routes by a value it has not read yet (a log record's severity) tests all of them
        with one read. Each event gets a second enabler at this word (the kernel keeps
        every enabler of an event up to date, and changes only its own bit); they are
        removed at :meth:`close`. None entries keep their bit at 0. Up to 32."""
        if len(registrations) > 32:
            raise ValueError("an enable word has 32 bits")
        present = [(bit, r) for bit, r in enumerate(registrations) if r is not None]
        if not present or not self.available:
            return _NEVER
        word, address = _enable_words.acquire()
        added: list[tuple[int, str]] = []
        try:
            for bit, registration in present:
                uapi.register_ioctl(self.fd, registration.command, registration.flags, address, bit)
                added.append((bit, registration.command))
        except BaseException:
            for bit, command in added:
                uapi.unregister_ioctl(self.fd, address, bit, command)
            _enable_words.release(address)
            raise
        with self._lock:
            self._shared_words.append((address, added))
        return word

    def _unregister_shared_words(self) -> None:
        with self._lock:
            shared, self._shared_words = self._shared_words, []
        for address, enablers in shared:
            released = True
            for bit, command in enablers:
                try:
                    uapi.unregister_ioctl(self.fd, address, bit, command)
                except UserEventsError as exc:
                    released = released and exc.errno == errno.ENOENT
            if released:  # else the kernel may still write the word: never reuse it
                _enable_words.release(address)

    def delete(self, name: str) -> None:
        """Delete the events registered as ``name`` (needs no other user of them)."""
        if not self.available:
            raise UserEventsUnavailable(errno.ENODEV, self.reason or "user_events unavailable")
        uapi.delete_ioctl(self.fd, name)

    def close(self) -> None:
        """Unregister every registration of this object, then close the file; idempotent.

        Safe while other threads write: writes from now on fail with EBADF without touching
        the descriptor, and the file is closed only after the writes in flight end, so no
        write can reach a file the application opens later under the same number."""
        self._wait_for_writes()
        with self._lock:
            registrations = list(self._registrations.values())
        if self.fd >= 0:
            self._unregister_shared_words()
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


_NEVER = memoryview(b"\0\0\0\0").cast("I")

_all_data: weakref.WeakSet[UserEventsData] = weakref.WeakSet()


def _forget_writes_in_flight() -> None:
    """In a forked child, the threads that were writing do not exist: nothing is in flight."""
    for data in list(_all_data):
        data._writing.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_writes_in_flight)


def enable_word(registration: Registration | None) -> memoryview:
    """Where to read ``registration``'s enable bit: ``word[0]`` is non-zero while a tracer
    listens. Without a registration, a word that stays 0. The one way every hot path reads
    the bit (one memory read, no call, one attribute: as cheap as Python can test)."""
    if registration is None:
        return _NEVER
    return registration.enable_word
