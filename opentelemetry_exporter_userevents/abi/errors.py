# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Kernel errors from user_events, with what each errno means for each operation."""

from __future__ import annotations

import errno
import os

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
