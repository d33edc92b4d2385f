# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Services in containers, one reader on the host: two "containers" (tests/support/
simulated_container.py: their own mount, user, pid, UTS and IPC namespaces and cgroup,
tracefs unmounted, only ``user_events_data`` bind-mounted, a non-root user with the group
grant on that file alone) run the same service with the same prefix. The host's reader,
started before them, records both: each span and log is the app's own OTLP encoding, with
its own ``container.id`` (from its cgroup, as Docker and Kubernetes name them), the host's
``process.pid`` (the app's own, 1, as ``process.vpid``) and ``host.name``. The two apps'
resources are identical (same service, both pid 1), so only the writer's pid tells them
apart: each record must be named by its own writer."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import reader_process as proc
from tests.support.kernel_support import unmount, wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel

SERVICE_GID = 4243
"""The group granted read-write access to user_events_data (and nothing else of tracefs)."""

ROOT = Path(__file__).resolve().parent.parent.parent


def _id(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


DOCKER_ID, CONTAINERD_ID = _id("docker"), _id("containerd")
POD_UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CGROUPS = {
    # Docker with the systemd cgroup driver
    "ctr-a": (f"system.slice/docker-{DOCKER_ID}.scope", DOCKER_ID),
    # Kubernetes (kubelet's systemd driver) with containerd
    "ctr-b": (
        "kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{POD_UID.replace('-', '_')}.slice/"
        f"cri-containerd-{CONTAINERD_ID}.scope",
        CONTAINERD_ID,
    ),
}


@pytest.fixture
def cgroup_root(tmp_path_factory) -> Iterator[Path]:
    """A cgroup2 mount with one cgroup per container, removed after the test."""
    root = Path("/dev/shm") / f"cgroup2-{os.getpid()}"
    root.mkdir()
    subprocess.run(["mount", "-t", "cgroup2", "none", str(root)], check=True)
    made: list[Path] = []
    try:
        for path, _ in CGROUPS.values():
            for depth in range(1, len(Path(path).parts) + 1):
                directory = root.joinpath(*Path(path).parts[:depth])
                if not directory.exists():
                    directory.mkdir()
                    made.append(directory)
        yield root
    finally:
        for directory in reversed(made):
            with contextlib.suppress(OSError):
                directory.rmdir()
        unmount(str(root))
        root.rmdir()


@pytest.fixture
def host_name() -> Iterator[str]:
    """The guest's node name, set for the test (the kernel's default, ``(none)``, names no
    host, so a reader adds no ``host.name`` for it)."""
    saved = socket.gethostname()
    socket.sethostname("node-1")
    try:
        yield "node-1"
    finally:
        socket.sethostname(saved)


@pytest.fixture
def data_file_grant(tracefs) -> Iterator[None]:
    """The README's grant, on user_events_data only: group-owned, mode 0660."""
    path = os.path.join(tracefs.path, "user_events_data")
    saved = os.stat(path)
    os.chown(path, -1, SERVICE_GID)
    os.chmod(path, 0o660)
    try:
        yield
    finally:
        os.chown(path, saved.st_uid, saved.st_gid)
        os.chmod(path, saved.st_mode & 0o7777)


def _container(
    cgroup: Path, data_at: Path, prefix: str, service: str, hostname: str, set_data: bool
) -> subprocess.Popen[str]:
    data_at.parent.mkdir(mode=0o755, exist_ok=True)
    data_at.touch()  # a bind mount's mount point
    command = [sys.executable, "-m", "tests.support.simulated_container", str(cgroup),
               str(data_at), prefix, service, hostname, str(SERVICE_GID)]  # fmt: skip
    if set_data:
        command.append("--set-data")
    return subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=ROOT,
    )  # fmt: skip


def _attribute(key: str, value: object) -> dict:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _with_resource(requests: list[dict], kind: str, change) -> list[dict]:
    """``requests`` with each resource's attributes changed by ``change``, then sorted by
    key (the reader adds attributes; where in the list is not what is tested)."""
    resources_key = {"spans": "resourceSpans", "logs": "resourceLogs"}[kind]
    requests = json.loads(json.dumps(requests))
    for request in requests:
        for resource in request.get(resources_key, ()):
            attributes = change(resource["resource"].get("attributes", []))
            resource["resource"]["attributes"] = sorted(attributes, key=lambda a: a["key"])
    return requests


def _host_view(host_pid: int, container_id: str, host: str):
    def change(attributes: list[dict]) -> list[dict]:
        app_pid = next(a for a in attributes if a["key"] == "process.pid")
        assert app_pid["value"] == {"intValue": "1"}, "the app saw itself as pid 1"
        kept = [a for a in attributes if a["key"] != "process.pid"]
        return kept + [
            _attribute("process.pid", host_pid),
            _attribute("process.vpid", 1),
            _attribute("container.id", container_id),
            _attribute("host.name", host),
        ]

    return change


def _unchanged(attributes: list[dict]) -> list[dict]:
    return attributes


def _requests(output: Path, kind: str) -> list[dict]:
    spans, logs = proc.requests(output)
    return spans if kind == "spans" else logs


def test_two_containers_each_named_by_its_own_writer(
    tracefs, prefix, tmp_path, cgroup_root, data_file_grant, host_name
):
    reader, output = proc.reader(tmp_path, "--prefix", prefix)
    plain, plain_output = proc.reader(tmp_path, "--prefix", prefix, "--no-resource-detection")
    shm = Path("/dev/shm") / f"ctr-{os.getpid()}"
    shm.mkdir(mode=0o755)
    service = "checkout"
    containers = {
        # found in /proc/mounts: a tracefs mount whose mount point is a file of that name
        "ctr-a": _container(cgroup_root / CGROUPS["ctr-a"][0], shm / "a" / "user_events_data",
                            prefix, service, "ctr-a", set_data=False),
        # named by OTEL_EXPORTER_USER_EVENTS_DATA, as the README's Kubernetes snippet does
        "ctr-b": _container(cgroup_root / CGROUPS["ctr-b"][0], shm / "b" / "ue",
                            prefix, service, "ctr-b", set_data=True),
    }  # fmt: skip
    try:
        started = {}
        for name, container in containers.items():
            line = container.stdout.readline()
            assert line, container.stderr.read()
            started[name] = json.loads(line)
        assert wait_until(lambda: proc.items(output) >= 26, 30), output.read_text()[-3000:]
        assert wait_until(lambda: proc.items(plain_output) >= 26, 30)
    finally:
        for container in containers.values():
            with contextlib.suppress(OSError):
                container.stdin.close()
            container.wait(timeout=60)
        shutil.rmtree(shm, ignore_errors=True)
    err = proc.stop(reader)
    proc.stop(plain)

    assert [c.returncode for c in containers.values()] == [0, 0]
    host_pids = {started[name]["host_pid"] for name in containers}
    assert len(host_pids) == 2 and 1 not in host_pids
    for kind in ("spans", "logs"):
        want_named, want_plain = {}, {}
        for name, run in started.items():
            own = [run["result"][kind]]
            change = _host_view(run["host_pid"], CGROUPS[name][1], host_name)
            want_named.update(flatten(_with_resource(own, kind, change), kind))
            want_plain.update(flatten(_with_resource(own, kind, _unchanged), kind))
        got = flatten(_with_resource(_requests(output, kind), kind, _unchanged), kind)
        got_plain = flatten(_with_resource(_requests(plain_output, kind), kind, _unchanged), kind)
        assert len(want_named) == {"spans": 12, "logs": 14}[kind]
        assert got == want_named, kind
        assert got_plain == want_plain, kind
    assert "lost 0" in err
