# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A machine-wide reader answers announcements whatever its main loop is doing: here the
main loop is stuck writing its output to a FIFO nobody reads, and new services started one
after another are still listened to before their first record (none gives up waiting), and
every record of theirs is in the output once the FIFO is read."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import termios
import threading

import pytest

from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

PIPE_SIZE = 4096
APPS = 4
FILLERS = 8


def _waiting(fd: int) -> int:
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return int.from_bytes(buf, sys.byteorder)


def _in_write(pid: int) -> bool:
    """The process's main thread is in write(2) (x86-64 syscall 1), blocked."""
    with open(f"/proc/{pid}/syscall") as f:
        return f.read().split(" ", 1)[0] == "1"


def _announcing_app(prefix: str, service: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.announcing_app", prefix, service],
        capture_output=True, text=True, cwd=proc.ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "did not listen" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def test_new_services_are_listened_to_while_the_main_loop_is_stuck(tracefs, prefix, tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    drain = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open, and not read until the end
    try:
        fcntl.fcntl(drain, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        reader, _ = proc.reader(tmp_path, "--prefix", "*", "--format", "otlp-json", "-o", str(fifo))
        for number in range(FILLERS):  # jobs of 13 records each, until the pipe is full
            proc.finished(proc.app(f"{prefix}fill{number}", f"{prefix}-filler-{number}"))
            if wait_until(lambda: _in_write(reader.pid), 10):
                break
        assert _in_write(reader.pid)  # the main loop is blocked writing its output
        stuck_at = _waiting(drain)

        services = [f"{prefix}-new-{n}" for n in range(APPS)]
        results = [_announcing_app(f"{prefix}n{n}", services[n]) for n in range(APPS)]
        assert _waiting(drain) == stuck_at and _in_write(reader.pid)  # still stuck
        waits = []
        for result in results:
            for exporter in ("span", "log"):
                assert result[exporter]["listened"], result
                assert not result[exporter]["gave_up"], result  # within its 2 s timeout
                waits.append(result[exporter]["waited"])
        print(f"announcement waits (s), main loop stuck: {sorted(waits)}")

        chunks: list[bytes] = []

        def read_all() -> None:
            os.set_blocking(drain, True)
            while chunk := os.read(drain, 65536):
                chunks.append(chunk)

        reading = threading.Thread(target=read_all, daemon=True)
        reading.start()
        err = proc.stop(reader)
        reading.join(60)
        assert not reading.is_alive()
    finally:
        os.close(drain)

    lines = [json.loads(line) for line in b"".join(chunks).decode().splitlines()]
    spans = flatten([x for x in lines if "resourceSpans" in x], "spans")
    logs = flatten([x for x in lines if "resourceLogs" in x], "logs")
    for service in services:  # every record of every new service, its resource included
        assert sum(f'"{service}"' in text for text in spans.values()) == 1, service
        assert sum(f'"{service}"' in text for text in logs.values()) == 1, service
    assert "may have lost their first records" not in err, err
    assert "lost 0" in err, err
