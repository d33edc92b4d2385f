# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Other user_events names on the host, for kernel tests of what the reader's rescans cost:
``COUNT`` tracepoints that are not ours (``other_<n>``), each registered once through one
``user_events_data`` fd, which keeps them all until this process exits (the enable bit is
released after each registration: the fd's reference keeps the event). Multi-format where
the kernel takes it, else single-format.

``python -m tests.support.other_names COUNT``: prints ``ready <multi|single>`` once every
name is registered, then holds them until stdin closes.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys

from opentelemetry_exporter_userevents.abi.errors import UserEventsError
from opentelemetry_exporter_userevents.abi.tracefs import find_tracefs
from opentelemetry_exporter_userevents.abi.uapi import (
    USER_EVENT_REG_MULTI_FORMAT,
    register_ioctl,
    unregister_ioctl,
)


def register(count: int, start: int = 0) -> tuple[int, str]:
    """Register ``other_<start>`` .. ``other_<start + count - 1>``; the fd that holds them,
    and the layout used."""
    tracefs = find_tracefs()
    fd = os.open(os.path.join(tracefs.path, "user_events_data"), os.O_RDWR)
    word = mmap.mmap(-1, mmap.PAGESIZE)
    address = ctypes.addressof(ctypes.c_uint32.from_buffer(word))
    flags, layout = USER_EVENT_REG_MULTI_FORMAT, "multi"
    for number in range(start, start + count):
        command = f"other_{number} u32 value"
        try:
            register_ioctl(fd, command, flags, address, 0)
        except UserEventsError as exc:
            if exc.errno != errno.EINVAL or not flags:
                raise
            flags, layout = 0, "single"  # a kernel without MULTI_FORMAT (6.4 to 6.8)
            register_ioctl(fd, command, flags, address, 0)
        unregister_ioctl(fd, address, 0, command)
    return fd, layout


def main(count: int) -> None:
    fd, layout = register(count)
    print(f"ready {layout}", flush=True)
    sys.stdin.read()
    os.close(fd)


if __name__ == "__main__":
    main(int(sys.argv[1]))
