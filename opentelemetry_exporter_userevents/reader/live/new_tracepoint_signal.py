# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Whether a multi-format tracepoint was made on the machine since the last look, in O(1)
whatever the number of user_events names: a rescan lists every name only when this says so.

The kernel names multi-format tracepoints ``<name>.<hex id>`` from one counter for all of
them (docs: user_events ABI). The reader registers a tracepoint of its own,
``otel_userevents_rescan_<pid>``, with a format it never used (so the kernel makes a new
one) and holds it until the next probe: if it got the id after the previous probe's
(one ``stat`` of ``<name>.<expected id>``), nobody made a multi-format tracepoint in
between. Eventfs gives no cheaper sign: on 6.12 a system directory's ``mtime``, ``nlink``
and ``size`` do not change when events are added. A full listing learns the id of the
probe it saw (:meth:`learn`). Not seen: single-format tracepoints (the rescan lists those
at a low rate, :mod:`.rescan_schedule`), and every kernel without MULTI_FORMAT (6.4 to
6.8: :attr:`unavailable` says why, and the rescan lists at its bounded rate).
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Iterable

from opentelemetry_exporter_userevents.abi.format import split_multi_format_name
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.abi.uapi import (
    USER_EVENT_REG_MULTI_FORMAT,
    USER_EVENTS_MULTI_SYSTEM,
    register_ioctl,
    unregister_ioctl,
)

PROBE_NAME = "otel_userevents_rescan"
"""The probe tracepoint's name, before ``_<pid>`` (one per reader, so readers do not take
each other's probes for their own)."""


class NewTracepointSignal:
    """Registers a fresh probe tracepoint per look; says whether another came between."""

    def __init__(self, tracefs: Tracefs) -> None:
        self.tracefs = tracefs
        self.name = f"{PROBE_NAME}_{os.getpid()}"
        self.unavailable: str | None = None
        """Why there is no signal here (the rescan then lists at its bounded rate)."""
        self.probes = 0
        self._serial = 0
        self._expected: int | None = None
        """The id the next probe gets if no other multi-format tracepoint is made first;
        None until a listing saw a probe."""
        self._held = -1
        self._word = mmap.mmap(-1, mmap.PAGESIZE)
        self._address = ctypes.addressof(ctypes.c_uint32.from_buffer(self._word))

    def changed(self) -> bool:
        """Register the next probe: True if a multi-format tracepoint was made since the
        previous one (or nothing is known yet, or there is no signal)."""
        if self.unavailable is not None:
            return True
        try:
            fd = self._register()
        except OSError as error:
            self.unavailable = f"no multi-format probe: {error}"
            self._expected = None
            self._release()
            return True
        self._release()
        self._held = fd
        expected, self._expected = self._expected, None
        if expected is not None and os.path.isdir(
            self.tracefs.event_dir(USER_EVENTS_MULTI_SYSTEM, f"{self.name}.{expected:x}")
        ):
            self._expected = expected + 1
            return False
        return True

    @property
    def next_id(self) -> int | None:
        """The id the next multi-format tracepoint gets, as of the last probe that saw no
        other (None when not known): an announced prefix's look-up tries its ids from
        there (:mod:`.announced_tracepoints`), since its app registered them after."""
        return self._expected

    def learn(self, multi_format_names: Iterable[str]) -> None:
        """After a full listing of ``user_events_multi`` made after :meth:`changed`: the
        probe held then is in it, and the next one's id follows it."""
        highest = -1
        for name in multi_format_names:
            base, format_id = split_multi_format_name(name)
            if base == self.name and format_id is not None and format_id > highest:
                highest = format_id
        self._expected = highest + 1 if highest >= 0 and self._held >= 0 else None

    def _register(self) -> int:
        fd = os.open(os.path.join(self.tracefs.path, "user_events_data"), os.O_RDWR | os.O_CLOEXEC)
        self._serial += 1
        command = f"{self.name} u32 n{self._serial}"
        try:
            register_ioctl(fd, command, USER_EVENT_REG_MULTI_FORMAT, self._address, 0)
            unregister_ioctl(fd, self._address, 0, command)  # the fd's reference holds it
        except BaseException:  # UserEventsError is an OSError
            os.close(fd)
            raise
        self.probes += 1
        return fd

    def _release(self) -> None:
        """Let the kernel delete the probe held (it does when the last reference goes)."""
        if self._held >= 0:
            os.close(self._held)
            self._held = -1

    def close(self) -> None:
        """Release the probe held (idempotent)."""
        self._release()
