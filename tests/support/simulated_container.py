# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A service in a container, as a runtime makes one, for kernel tests (run as root).

``python -m tests.support.simulated_container CGROUP DATA_AT PREFIX SERVICE HOSTNAME GID
[--set-data]`` builds what Docker or a Kubernetes pod gives a service that was granted
user_events: a mount namespace where tracefs is unmounted and the host's
``user_events_data`` alone is bind-mounted at ``DATA_AT``; the cgroup ``CGROUP`` (a
directory of a cgroup2 mount); a non-root user (nobody) whose one extra group is ``GID``,
the README's group grant; then a user namespace of its own, and in it new pid, UTS and IPC
namespaces with ``HOSTNAME``. The service (tests/support/short_app.py, its resource
carrying ``process.pid`` as the SDK's process detector reports it: 1, in its pid
namespace) runs as that namespace's pid 1. With ``--set-data`` it is told the data file
by OTEL_EXPORTER_USER_EVENTS_DATA; without, the exporters find it in ``/proc/mounts``.

It prints one JSON line, ``{"host_pid": ..., "result": <short_app's output>}``, then the
service stays alive (a service, not a job) until a line or EOF comes on stdin.

Everything is set up by system calls from this one Python process, which imports the
package before it gives up root: nobody cannot read the interpreter's files here.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys

from tests.support import short_app

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 1 << 18
MNT_DETACH = 2
PR_SET_DUMPABLE = 4
NOBODY = 65534

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def enter_mounts(data_at: str) -> None:
    """A private mount namespace with no tracefs and the data file bind-mounted alone."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate")
    source = "/sys/kernel/tracing/user_events_data"
    _check(_libc.mount(source.encode(), data_at.encode(), None, MS_BIND, None), "mount --bind")
    with open("/proc/self/mounts", encoding="utf-8") as f:
        tracing = [line.split()[1] for line in f if line.split()[2] in ("tracefs", "debugfs")]
    for point in sorted(tracing, key=len, reverse=True):
        if point != data_at:
            _check(_libc.umount2(point.encode(), MNT_DETACH), f"umount -l {point}")


def become_nobody(cgroup: str, gid: int) -> None:
    """Into the cgroup, then nobody with the granted group only."""
    _write(os.path.join(cgroup, "cgroup.procs"), str(os.getpid()))
    os.setgroups([gid])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    # setuid made the process undumpable: /proc/self/uid_map would then be root's.
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def enter_user_and_pid_namespaces(hostname: str) -> None:
    """A user namespace mapping nobody to itself (so the service is not root inside either;
    the granted group stays a supplementary group, as setgroups is denied), then pid, UTS
    and IPC namespaces for the children."""
    _check(_libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{NOBODY} {NOBODY} 1")
    _write("/proc/self/gid_map", f"{NOBODY} {NOBODY} 1")
    _check(_libc.unshare(CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC), "unshare(pid, uts, ipc)")
    socket.sethostname(hostname)


def main(argv: list[str]) -> int:
    cgroup, data_at, prefix, service, hostname, gid = argv[:6]
    set_data = "--set-data" in argv[6:]
    short_app.load_everything()  # while root: nobody cannot read the interpreter's files
    enter_mounts(data_at)
    become_nobody(cgroup, int(gid))
    enter_user_and_pid_namespaces(hostname)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pid 1 of the new pid namespace
        os.close(reader)
        code = 0
        try:
            with os.fdopen(writer, "w") as out:
                if set_data:
                    os.environ["OTEL_EXPORTER_USER_EVENTS_DATA"] = data_at
                result = short_app.main(
                    prefix, service, False, more_resource={"process.pid": os.getpid()}
                )
                out.write(json.dumps(result) + "\n")
            sys.stdin.readline()  # a service: alive until told to stop
        except BaseException as exc:  # noqa: BLE001 - reported to the test, then exit
            sys.stderr.write(f"service failed: {exc!r}\n")
            code = 1
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(writer)
    with os.fdopen(reader) as results:
        line = results.readline()
    if line:
        sys.stdout.write(json.dumps({"host_pid": child, "result": json.loads(line)}) + "\n")
        sys.stdout.flush()
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
