# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Boot a qemu guest on a user_events kernel and run one command in it.

The guest's init is a shell script generated into a host directory that the guest also
mounts read-write over the same path, so results come back as files there.  The command
runs as root in the guest with tracefs mounted at /sys/kernel/tracing.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

KERNEL_ENV = "USER_EVENTS_KERNEL"
BEGIN = "@@testbed-begin@@"
END = "@@testbed-end@@"

_INIT = """#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tracefs nodev /sys/kernel/tracing
mountpoint -q /dev || mount -t devtmpfs dev /dev
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 testbed {share}
mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm
export TMPDIR=/dev/shm HOME=/dev/shm
{exports}
cd {cwd} || exit 1
echo {begin}
{command} </dev/null
echo $? > {share}/rc
echo {end}
sync
"""


@dataclass
class GuestRun:
    """What a guest run left: the command's exit code and the serial console text."""

    returncode: int | None
    """The command's exit code; None if the guest stopped before the command ended."""
    console: str
    directory: Path
    """The shared directory (kept only while the caller wants it)."""

    @property
    def output(self) -> str:
        """The console text between the begin and end markers: the command's output."""
        text = self.console
        start = text.find(BEGIN)
        if start < 0:
            return ""
        text = text[start + len(BEGIN) :].lstrip("\n")
        end = text.find(END)
        return text if end < 0 else text[:end]


def _clock_options() -> str:
    """The guest's only clocksource is the TSC (no ACPI, no HPET). Calibrating it against
    the PIT under emulation fails when the host is busy ("tsc: Unable to calibrate against
    PIT", seen in CI), and the guest then keeps time in jiffies (4 ms steps). qemu's TCG TSC
    is the host's, so its rate is given (``tsc_early_khz``: no calibration) when this host
    is a VM, whose ``cpu MHz`` is its TSC rate; ``tsc=reliable`` keeps the watchdog off."""
    options = "tsc=reliable"
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            text = f.read(1 << 16)
    except OSError:
        return options
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    mhz = next((line for line in text.splitlines() if line.startswith("cpu MHz")), "")
    if " hypervisor" in flags and " constant_tsc" in flags and ":" in mhz:
        try:
            khz = round(float(mhz.split(":", 1)[1]) * 1000)
        except ValueError:
            return options
        if khz > 0:
            options += f" tsc_early_khz={khz}"
    return options


def find_qemu() -> str | None:
    return shutil.which("qemu-system-x86_64")


def unavailable_reason(kernel: str | None) -> str | None:
    """Why a guest cannot be booted here, or None if it can."""
    if not kernel:
        return f"no kernel image: set {KERNEL_ENV} to a bzImage with CONFIG_USER_EVENTS=y"
    if not os.path.isfile(kernel):
        return f"{KERNEL_ENV}={kernel} is not a file"
    if os.uname().machine != "x86_64":
        return "the test bed boots x86_64 guests only"
    if find_qemu() is None:
        return "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
    return None


def run(
    kernel: str,
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 1800,
    memory_mb: int = 1024,
    on_line: Callable[[str], None] | None = None,
    keep: Callable[[Path], None] | None = None,
    on_start: Callable[[subprocess.Popen[str]], None] | None = None,
) -> GuestRun:
    """Boot ``kernel``, run ``argv`` in ``cwd`` as root, and return when the guest stops.

    ``on_line`` sees every console line as it arrives; ``on_start`` the qemu process, once
    started (to kill it, should the caller stop first).  ``keep`` is called with the
    shared directory before it is removed (to read files the command left there); the
    command finds that directory in ``$TESTBED_SHARE``.
    """
    qemu = find_qemu()
    if qemu is None:
        raise RuntimeError("qemu-system-x86_64 is not installed")
    cwd = os.path.abspath(cwd or os.getcwd())
    share = Path(tempfile.mkdtemp(prefix="user-events-testbed-"))
    try:
        share.chmod(0o755)
        variables = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
        variables["TESTBED_SHARE"] = str(share)
        init = share / "init.sh"
        init.write_text(
            _INIT.format(
                share=shlex.quote(str(share)),
                exports="\n".join(
                    f"export {name}={shlex.quote(value)}" for name, value in variables.items()
                ),
                cwd=shlex.quote(cwd),
                begin=BEGIN,
                end=END,
                command=shlex.join(argv),
            )
        )
        init.chmod(0o755)
        command = [
            qemu, "-accel", "tcg", "-cpu", "max", "-smp", "2", "-m", str(memory_mb),
            "-nographic", "-no-reboot", "-kernel", kernel,
            "-virtfs",
            "local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap",
            "-virtfs",
            f"local,path={share},mount_tag=testbed,security_model=none,multidevs=remap",
            "-append",
            "console=ttyS0 quiet panic=-1 " + _clock_options() + " root=root rootfstype=9p "
            f"rootflags=trans=virtio,version=9p2000.L,msize=262144 ro init={init}",
        ]  # fmt: skip
        lines: list[str] = []
        with subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        ) as process:
            if on_start is not None:
                on_start(process)
            timer = _Timer(timeout, process.kill)
            try:
                assert process.stdout is not None
                for line in process.stdout:
                    line = line.replace("\r", "")
                    lines.append(line)
                    if on_line is not None:
                        on_line(line)
                process.wait()
            finally:
                timer.cancel()
        if timer.fired:
            lines.append(f"\n[testbed: guest killed after {timeout:.0f} s]\n")
        rc_file = share / "rc"
        returncode = int(rc_file.read_text()) if rc_file.exists() else None
        result = GuestRun(returncode, "".join(lines), share)
        if keep is not None:
            keep(share)
        return result
    finally:
        shutil.rmtree(share, ignore_errors=True)


class _Timer:
    def __init__(self, seconds: float, action: Callable[[], None]) -> None:
        self.fired = False

        def fire() -> None:
            self.fired = True
            action()

        self._timer = threading.Timer(seconds, fire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()


def main(args: Sequence[str] | None = None) -> int:
    """``python -m testbed [--kernel IMAGE] [--timeout S] -- COMMAND...``"""
    parser = argparse.ArgumentParser(
        prog="python -m testbed",
        description="Run COMMAND as root in a qemu guest booted on a user_events kernel, "
        "with the host's file system mounted read-only at the same paths.",
    )
    parser.add_argument(
        "--kernel", default=os.environ.get(KERNEL_ENV), help=f"bzImage (${KERNEL_ENV})"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds (default 600)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args(args)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("no command given")
    reason = unavailable_reason(options.kernel)
    if reason:
        print(f"testbed: {reason}", file=sys.stderr)
        return 2
    inside = [False]

    def show(line: str) -> None:
        if END in line:
            inside[0] = False
        elif inside[0]:
            sys.stdout.write(line)
            sys.stdout.flush()
        elif BEGIN in line:
            inside[0] = True

    result = run(options.kernel, command, timeout=options.timeout, on_line=show)
    if result.returncode is None:
        sys.stderr.write(result.console[-4000:])
        print("testbed: the guest stopped before the command finished", file=sys.stderr)
        return 2
    return result.returncode
