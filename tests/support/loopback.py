# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The test bed's guest boots with ``lo`` down: kernel tests that talk to 127.0.0.1 (a
collector, a sink) bring it up first."""

from __future__ import annotations

import fcntl
import socket
import struct

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def bring_loopback_up() -> None:
    """``lo`` up, so that 127.0.0.1 answers (or refuses)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack_from("16sh", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | _IFF_UP))
