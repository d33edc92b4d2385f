# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Exporters wired to a stand-in for user_events_data, for unit tests of whole exports.

Registration "succeeds" with dense write indexes, every tracepoint is listened to unless a
test clears its enable word, and each ``writev`` becomes one SOCK_SEQPACKET message, so
record boundaries survive and every record can be decoded as the kernel would store it.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from pathlib import Path

from opentelemetry_exporter_userevents.abi import EventFormat, uapi, user_events
from opentelemetry_exporter_userevents.record.schema import Schema
from tests.support.records import HEADER, fields_the_kernel_accepts, format_of


class FakeKernel:
    def __init__(self, monkeypatch, tmp_path: Path) -> None:
        (tmp_path / "user_events_data").write_bytes(b"")
        self.tracefs = str(tmp_path)
        self.commands: list[str] = []
        self.messages: list[bytes] = []
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        real_open = user_events.open_user_events_data

        def open_data(path, data_path=None):
            tracefs, fd, reason = real_open(path, data_path)
            if fd >= 0:
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                os.dup2(ours.fileno(), fd)
                ours.close()
                self._drain(theirs)
            return tracefs, fd, reason

        def register_ioctl(fd, command, flags, address, bit, *args, **kwargs):
            text = command.decode() if isinstance(command, bytes) else command
            if text not in self.commands:
                self.commands.append(text)
            uapi.ffi.cast("uint32_t *", address)[0] = 1  # listened to
            return self.commands.index(text)

        monkeypatch.setattr(user_events, "open_user_events_data", open_data)
        monkeypatch.setattr(uapi, "register_ioctl", register_ioctl)
        monkeypatch.setattr(uapi, "unregister_ioctl", lambda *args, **kwargs: None)

    def _drain(self, sock: socket.socket) -> None:
        def run() -> None:
            while message := sock.recv(65536):
                self.messages.append(message)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self._sockets.append(sock)
        self._threads.append(thread)

    def records(self, name: str) -> list[bytes]:
        """Payloads written to the event registered as ``name`` (the write index stripped)."""
        return [
            m[4:]
            for m in self.messages
            if self.commands[struct.unpack_from("<i", m)[0]].split(" ", 1)[0] == name
        ]

    def decoded(self, schema: Schema, name: str) -> list[dict[str, object]]:
        fmt: EventFormat = format_of(schema, name)
        decoded = []
        for payload in self.records(name):
            fields_the_kernel_accepts(payload, schema)
            decoded.append(schema.unpack(HEADER + payload, fmt))
        return decoded

    def settle(self, *exporters) -> None:
        """Shut ``exporters`` down (all that used this fake) and wait until everything they
        wrote has been received."""
        for exporter in exporters:
            exporter.shutdown()
        for thread in self._threads:
            thread.join(timeout=30)
            assert not thread.is_alive(), "an exporter of this fake was not shut down"
