# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A machine-wide reader answers announcements whatever its main loop is doing: here the
main loop is stuck writing to a stderr nobody reads, and new services started one after
another are still listened to before their first record (none gives up waiting), and every
record of theirs is in the output once the main loop runs again."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import termios
import threading

import pytest

from opentelemetry_exporter_userevents._export.announce import DEFAULT_TIMEOUT_MS
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENT_REG_MULTI_FORMAT
from opentelemetry_exporter_userevents.record.tracepoints import announce_commands
from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

PIPE_SIZE = 4096
APPS = 4


def _waiting(fd: int) -> int:
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return int.from_bytes(buf, sys.byteorder)


def _in_write(pid: int) -> bool:
    """The process's main thread is in write(2) (x86-64 syscall 1), blocked."""
    with open(f"/proc/{pid}/syscall") as f:
        return f.read().split(" ", 1)[0] == "1"


def _announcing_app(prefix: str, service: str, gives_up: bool = False) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.announcing_app", prefix, service],
        capture_output=True, text=True, cwd=proc.ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ("did not listen" in done.stderr) == gives_up, done.stderr
    return json.loads(done.stdout)


def test_new_services_are_listened_to_while_the_main_loop_is_stuck(tracefs, prefix, tmp_path):
    """The main loop is stuck writing its progress line to a stderr nobody reads (the output
    has a thread of its own, so a stuck output would not stop it)."""
    fifo, ready, output = tmp_path / "err.fifo", tmp_path / "ready", tmp_path / "out"
    os.mkfifo(fifo)
    drain = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open, and not read until the end
    filler = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    reader_err = os.open(fifo, os.O_WRONLY)
    try:
        fcntl.fcntl(drain, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        reader = subprocess.Popen(
            [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
             "--ready-file", str(ready), "-o", str(output), "--resource-wait", "2",
             "--progress", "--prefix", "*"],
            stdout=subprocess.DEVNULL, stderr=reader_err, cwd=proc.ROOT,
        )  # fmt: skip
        assert wait_until(lambda: ready.exists() and bool(ready.read_text()), proc.READY_WITHIN)
        _fill(filler)  # the next progress line (every 2 s) blocks the main loop
        assert wait_until(lambda: _in_write(reader.pid), 30)
        stuck_at = _waiting(drain)

        services = [f"{prefix}-new-{n}" for n in range(APPS)]
        results = [_announcing_app(f"{prefix}n{n}", services[n]) for n in range(APPS)]
        assert _waiting(drain) == stuck_at and _in_write(reader.pid)  # still stuck
        for result in results:
            for exporter in ("span", "log"):
                assert result[exporter]["listened"], result
                assert not result[exporter]["gave_up"], result  # within its 2 s timeout

        chunks: list[bytes] = []

        def read_all() -> None:
            os.set_blocking(drain, True)
            while chunk := os.read(drain, 65536):
                chunks.append(chunk)

        reading = threading.Thread(target=read_all, daemon=True)
        reading.start()
        os.close(filler)
        filler = -1
        reader.send_signal(signal.SIGINT)
        assert reader.wait(120) == 0
        os.close(reader_err)
        reader_err = -1
        reading.join(60)
        assert not reading.is_alive()
    finally:
        for fd in (drain, filler, reader_err):
            if fd >= 0:
                os.close(fd)

    err = b"".join(chunks).replace(b"\0", b"").decode()
    spans, logs = proc.requests(output)
    spans, logs = flatten(spans, "spans"), flatten(logs, "logs")
    for service in services:  # every record of every new service, its resource included
        assert sum(f'"{service}"' in text for text in spans.values()) == 1, service
        assert sum(f'"{service}"' in text for text in logs.values()) == 1, service
    assert "may have lost their first records" not in err, err
    assert "lost 0" in err, err


def _fill(fd: int) -> None:
    """Write NULs to a pipe until it is full (the reader's own text has none)."""
    while True:
        try:
            os.write(fd, b"\0" * 512)
        except BlockingIOError:
            return


def test_what_an_app_waits_when_a_stock_tool_listens_to_every_user_event(data, tmp_path, prefix):
    """No reader of ours; ``trace-cmd record -e 'user_events_multi:*'`` (or ``user_events``
    without multi-format) started while the announcement tracepoint existed (here a
    neighbour holds it, as an app starting then does) enables it, and keeps it while it
    runs. A writer cannot tell that tool from a machine-wide reader of ours (it sees one
    enable bit), so each new app's first exporter waits its whole timeout, once per
    process: its second exporter does not wait (README, "What --prefix '*' records")."""
    trace_cmd = shutil.which("trace-cmd")
    if trace_cmd is None:
        pytest.skip("trace-cmd is not installed (Debian: apt-get install trace-cmd)")
    multi, single = announce_commands()
    neighbour = data.register(multi, USER_EVENT_REG_MULTI_FORMAT, single_format_command=single)
    tool = proc.background(
        trace_cmd, "record", "-e", f"{neighbour.system}:*", "-o", str(tmp_path / "trace.dat")
    )
    assert wait_until(lambda: neighbour.enabled, 60), tool.stderr
    neighbour.unregister()  # the tool's enabling keeps the tracepoint

    result = _announcing_app(prefix, f"{prefix}-beside-a-tool", gives_up=True)
    proc.stop(tool)
    first, second = result["span"], result["log"]
    assert first["listened"] and first["gave_up"], result
    assert first["waited"] >= DEFAULT_TIMEOUT_MS / 1000  # the whole timeout, for nobody
    assert second["gave_up"] and second["waited"] == 0.0  # once per process
