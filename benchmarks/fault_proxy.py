# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A proxy in front of a real collector that fails as collectors fail, for the collector
load benchmark: the reader keeps one endpoint for its whole life while the benchmark
changes what answers there.

:class:`FaultProxy` listens on 127.0.0.1. In ``pass`` mode it pipes each connection to the
collector byte for byte (a collector that is down: the connection is closed at once, a
connection error to the reader). In the other modes it reads each HTTP request itself and
answers without passing it on: ``dribble`` (200 OK, one byte every :data:`DRIBBLE` s, never
finished), ``429`` (with ``Retry-After: 5``), ``429 60`` (``Retry-After: 60``), ``500``, and
``huge`` (503 with a body of
:data:`HUGE` bytes). A change of mode closes every open connection, so that a kept-alive
connection does not carry on in the old mode.
"""

from __future__ import annotations

import socket
import threading
import time

DRIBBLE = 0.5
"""Seconds between two bytes of a dribbled answer."""
HUGE = 300 * 1024 * 1024
"""Bytes of the ``huge`` answer's body (an error page no reader should hold)."""
RETRY_AFTER = 5
"""Seconds the ``429`` answer asks the reader to wait."""
LONG_RETRY_AFTER = 60
"""Seconds the ``429 60`` answer asks the reader to wait."""
MODES = ("pass", "dribble", "429", "429 60", "500", "huge")


class FaultProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.mode = "pass"
        self.answered: dict[str, int] = dict.fromkeys(MODES, 0)
        self.log: list[tuple[float, str]] = []
        """(monotonic time, mode) of each request answered here, and of each connection
        piped (``pass``): when the reader asked."""
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def set_mode(self, mode: str) -> None:
        assert mode in MODES, mode
        with self._lock:
            self.mode = mode
            connections, self._open = self._open, set()
        for connection in connections:
            _close(connection)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self._open.add(client)
                mode = self.mode
            threading.Thread(target=self._serve, args=(client, mode), daemon=True).start()

    def _serve(self, client: socket.socket, mode: str) -> None:
        try:
            if mode == "pass":
                self._pipe(client)
            else:
                while _read_request(client):
                    with self._lock:
                        self.answered[mode] += 1
                        self.log.append((time.monotonic(), mode))
                    _answer(client, mode)
        except OSError:
            pass
        finally:
            _close(client)

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
        except OSError:
            return  # the collector is down: closed at once
        upstream.settimeout(None)
        with self._lock:
            self._open.add(upstream)
        with self._lock:
            self.answered["pass"] += 1
            self.log.append((time.monotonic(), "pass"))
        back = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
        back.start()
        _copy(client, upstream)
        back.join(timeout=60)
        _close(upstream)


def _copy(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        _close(target)


def _close(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    connection.close()


def _read_request(client: socket.socket) -> bool:
    """One HTTP request read and thrown away; False once the reader closed."""
    head = b""
    while b"\r\n\r\n" not in head:
        data = client.recv(65536)
        if not data:
            return False
        head += data
    header, _, body = head.partition(b"\r\n\r\n")
    length = 0
    for line in header.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        data = client.recv(min(65536, length - len(body)))
        if not data:
            return False
        body += data
    return True


def _answer(client: socket.socket, mode: str) -> None:
    if mode == "dribble":
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" * 1000:
            client.sendall(bytes([byte]))
            time.sleep(DRIBBLE)
    elif mode in ("429", "429 60"):
        client.sendall(
            b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: %d\r\nContent-Length: 0\r\n\r\n"
            % (RETRY_AFTER if mode == "429" else LONG_RETRY_AFTER)
        )
    elif mode == "500":
        client.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
    elif mode == "huge":
        client.sendall(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
            b"Content-Length: %d\r\n\r\n" % HUGE
        )
        chunk = b"x" * 65536
        for _ in range(HUGE // len(chunk)):
            client.sendall(chunk)
