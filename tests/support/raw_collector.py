# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A collector on 127.0.0.1 that answers as a test tells it to: the OTLP/HTTP output's host
tests (tests/reader/outputs/conftest.py gives it as the ``collector`` fixture) and the
kernel tests of a collector that dribbles (tests/kernel/test_reader_outputs.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class RawServer:
    """A collector on 127.0.0.1 that misbehaves: ``answer(connection, request)`` writes
    what it likes on each connection, after reading each request whole."""

    def __init__(self, answer: Callable[[socket.socket, int], None]) -> None:
        self.answer = answer
        self.stop = threading.Event()
        self.requests = 0
        self.connections = 0
        self.sent = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            file = connection.makefile("rb")
            try:
                while not self.stop.is_set():
                    length = 0
                    while (line := file.readline()) not in (b"\r\n", b""):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    if line == b"":
                        return
                    file.read(length)
                    self.requests += 1
                    self.answer(connection, self.requests)
            except OSError:
                return

    def send(self, connection: socket.socket, data: bytes) -> None:
        connection.sendall(data)
        self.sent += len(data)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
