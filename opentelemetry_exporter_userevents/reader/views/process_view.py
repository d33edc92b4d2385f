# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the host sees of a writer process: its container, its process id in the host's pid
namespace, the host's name; added by ``record`` to the resource of each record the process
wrote, as the Collector's ``resourcedetection`` processor (``override: false``) and
``k8sattributes`` processor add them to what they receive.

The kernel gives every record its writer's pid (``common_pid``): the id of the writing
*thread* (exporters often write from an SDK worker thread) in the host's (initial) pid
namespace. From ``/proc/<pid>`` (one directory, so both files are the same task's):

- ``status``: ``Tgid:``, the thread group (process) id in the host's pid namespace, and
  ``NStgid:``, that id in each pid namespace from the host's down to the process's own.
  Where the innermost differs, the app's SDK reported it as ``process.pid``.
- ``cgroup``: the cgroup v2 line (``0::/path``) and the v1 lines (``N:controllers:/path``).
  The deepest path segment naming a container gives ``container.id``
  (:func:`container_id_of_path`).

Attributes, as the OpenTelemetry semantic conventions name them:

- ``container.id``: a 64-hex id, only where the app's resource has none.
- ``host.name``: the reader's host's name (``socket.gethostname()``), only where the app's
  resource has none, and only when the reader is in the host's UTS namespace (a reader in a
  container has the container's name: it then adds none, and says so).
- ``process.pid`` and ``process.vpid``: where the app's ``process.pid`` is the process's id
  in its own pid namespace (the innermost ``NStgid``) and differs from the host's, the
  host's becomes ``process.pid`` and the app's ``process.vpid`` ("the process ID within a
  PID namespace"); never when the app set ``process.vpid`` itself.

Every other attribute is the app's, unchanged. Two containers running the same app make
identical resources (same service, both ``process.pid`` 1), hence the same resource id: the
view is therefore each *record's* (its pid's), and the join_stage keeps one resource per
resource id and view (:mod:`.join_stage`).

Views are kept per pid (:data:`MAX_PIDS`, the oldest forgotten and counted) and read again
when :data:`REFRESH_SECONDS` have passed since they were read, and when a resource record
comes from the pid (a process announces its resource at its start and every interval; a
new process that got an old pid thus replaces the old view at once, when it writes its
resource from that thread, and within :data:`REFRESH_SECONDS` otherwise). A writer gone
before the reader looked (a short job, a reader behind its writers) has no view: its
records get ``host.name`` alone, and are counted (:class:`ViewStats`).

Only a reader in the host's pid namespace, whose ``/proc`` shows that namespace, can look
the kernel's pids up: elsewhere a pid names no process or another one. :func:`live_views`
turns detection off there and says why (:func:`reader_namespaces`).

Untrusted text: whoever creates a cgroup chooses its name (root, or a user a subtree was
delegated to, as rootless Podman's). Nothing of a path goes into an attribute but an id
that is exactly 64 lowercase hex digits in one of the runtimes' segment forms; a cgroup
file with a hierarchy listed twice (a name with a line break in it) gives no id. Each file
is read through a bounded read (:data:`STATUS_LIMIT`, :data:`CGROUP_LIMIT`), a line cut by
the limit is dropped. ``container.id`` tells the cgroup a process is in, as its runtime
named it, no more: an app could name any container in its own resource anyway.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from typing import NamedTuple

from opentelemetry.sdk.resources import Resource

PROC_PID_INIT_INO = 0xEFFFFFFC
"""The inode of the initial pid namespace (``include/linux/proc_ns.h``)."""
PROC_UTS_INIT_INO = 0xEFFFFFFE
"""The inode of the initial UTS namespace (``include/linux/proc_ns.h``)."""

MAX_PIDS = 4096
"""Pids whose view is kept; past this the one read first is forgotten (``forgotten``)."""
REFRESH_SECONDS = 10.0
"""A view older than this is read again at the pid's next record (pids are reused)."""
STATUS_LIMIT = 64 * 1024
"""Bytes of ``/proc/<pid>/status`` read at most (``Tgid`` is near the top; ``NStgid``
follows ``Groups``)."""
CGROUP_LIMIT = 16 * 1024
"""Bytes of ``/proc/<pid>/cgroup`` read at most (a v1 host lists a dozen hierarchies)."""
MAX_PID_NAMESPACE_LEVELS = 33
"""The host's pid namespace and 32 nested ones (the kernel's ``MAX_PID_NS_LEVEL``)."""

_HEX_ID = re.compile(r"[0-9a-f]{64}")
RUNTIME_PREFIXES = ("docker-", "cri-containerd-", "crio-", "libpod-")
"""Segment prefixes of the systemd cgroup driver's scopes: Docker (rootful and rootless)
and cri-dockerd, containerd's CRI plugin, CRI-O, Podman."""


def container_id_of_path(path: str) -> str | None:
    """The id of the container a cgroup path is in, or None.

    The deepest segment that is, once a ``.scope`` suffix is removed, either 64 lowercase
    hex digits (cgroupfs drivers: Docker ``/docker/<id>``, Kubernetes
    ``/kubepods/<qos>/pod<uid>/<id>``, ECS ``/ecs/<task>/<id>``) or one of
    :data:`RUNTIME_PREFIXES` and 64 hex digits (systemd drivers:
    ``/system.slice/docker-<id>.scope``, ``.../kubepods-<qos>-pod<uid>.slice/
    cri-containerd-<id>.scope``, ``crio-<id>.scope``, ``/machine.slice/libpod-<id>.scope
    /container``, rootless ``/user.slice/user-1000.slice/user@1000.service/user.slice/
    libpod-<id>.scope``). Deepest, because a process in a sub-cgroup of a container
    (Podman's ``container``, systemd inside a container) is in that container, and a
    nested container's id is below its host container's.

    Modelled on the OpenTelemetry SDKs' container detectors, which read
    ``/proc/self/cgroup`` the same way: Go's ``go.opentelemetry.io/otel/sdk/resource``
    (``cgroupContainerIDRe = ^.*/(?:.*[-:])?([0-9a-f]+)(?:\\.|\\s*$)``: a segment's hex
    tail after its last ``-`` or ``:``, ending the segment or followed by ``.``) and the
    64-digit variant of opentelemetry-go-contrib and Grafana Alloy (``[0-9a-f]{64}``), and
    Java's ``CgroupV1ContainerIdExtractor`` (last segment, between its last ``-`` and
    ``.``, hex). Stricter than those: only the runtimes' own prefixes, so CRI-O's monitor
    ``crio-conmon-<id>.scope`` (and Podman's ``libpod-conmon-<id>.scope``), which holds
    ``conmon`` and never the app, is not taken for the container, and exactly 64 digits, so
    a login session (``session-145.scope``) is not an id.
    """
    for segment in reversed(path.split("/")):
        name = segment[:-6] if segment.endswith(".scope") else segment
        if _HEX_ID.fullmatch(name):
            return name
        for prefix in RUNTIME_PREFIXES:
            if name.startswith(prefix) and _HEX_ID.fullmatch(name, len(prefix)):
                return name[len(prefix) :]
    return None


def container_id_of_cgroup(text: str) -> str | None:
    """The container id of a ``/proc/<pid>/cgroup`` text (:func:`container_id_of_path`):
    the cgroup v2 path first, then the v1 paths in order; None when none names one, or when
    the text is not the kernel's shape (a hierarchy listed twice, which only a cgroup name
    with a line break in it makes)."""
    unified: list[str] = []
    legacy: list[str] = []
    hierarchies: set[str] = set()
    for line in text.split("\n"):
        hierarchy, _, rest = line.partition(":")
        controllers, colon, path = rest.partition(":")
        if not colon or not (hierarchy.isascii() and hierarchy.isdigit()):
            continue
        if hierarchy in hierarchies:
            return None
        hierarchies.add(hierarchy)
        if not path.startswith("/"):
            continue
        (unified if hierarchy == "0" and not controllers else legacy).append(path)
    for path in unified + legacy:
        found = container_id_of_path(path)
        if found is not None:
            return found
    return None


class ThreadGroup(NamedTuple):
    tgid: int
    """The process id in the pid namespace of the ``/proc`` it was read from."""
    namespace_tgids: tuple[int, ...]
    """``NStgid``: that id in each pid namespace, from the ``/proc``'s down to the
    process's own (empty when the line was missing or unreadable)."""


def _pid_number(text: str) -> int | None:
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 10:
        return None
    number = int(text)
    return number if 0 < number < 2**31 else None


def thread_group_of_status(text: str) -> ThreadGroup | None:
    """``Tgid`` and ``NStgid`` of a ``/proc/<pid>/status`` text; None without a valid
    ``Tgid``. ``NStgid`` is kept only if well formed and its first id is ``Tgid``."""
    tgid: int | None = None
    namespace_tgids: tuple[int, ...] = ()
    for line in text.split("\n"):
        if line.startswith("Tgid:"):
            tgid = _pid_number(line[5:])
        elif line.startswith("NStgid:"):
            fields = line[7:].split()
            numbers = [_pid_number(field) for field in fields[: MAX_PID_NAMESPACE_LEVELS + 1]]
            if 0 < len(numbers) <= MAX_PID_NAMESPACE_LEVELS and None not in numbers:
                namespace_tgids = tuple(n for n in numbers if n is not None)
    if tgid is None:
        return None
    if namespace_tgids and namespace_tgids[0] != tgid:
        namespace_tgids = ()
    return ThreadGroup(tgid, namespace_tgids)


class ProcessView(NamedTuple):
    """What the host sees of a writer process, as far as it changes the resource (equal
    views give equal resources: the join_stage keeps one per resource and view)."""

    container_id: str | None = None
    host_pid: int | None = None
    """The host's id of the process, where its own pid namespace's differs; else None."""
    namespace_pid: int | None = None
    """The process's id in its own pid namespace, where it differs from the host's."""


NO_VIEW = ProcessView()
"""A process on the host itself, or one that could not be looked up."""


def view_of(thread_group: ThreadGroup | None, cgroup_text: str | None) -> ProcessView:
    container_id = container_id_of_cgroup(cgroup_text) if cgroup_text is not None else None
    host_pid = namespace_pid = None
    if thread_group is not None and len(thread_group.namespace_tgids) > 1:
        own = thread_group.namespace_tgids[-1]
        if own != thread_group.tgid:
            host_pid, namespace_pid = thread_group.tgid, own
    if container_id is None and host_pid is None:
        return NO_VIEW
    return ProcessView(container_id, host_pid, namespace_pid)


def merged_resource(resource: Resource, view: ProcessView, host_name: str | None) -> Resource:
    """``resource`` with what ``view`` and ``host_name`` add (see the module); the same
    object when they add nothing."""
    attributes = resource.attributes
    added: dict[str, str | int] = {}
    if view.container_id is not None and "container.id" not in attributes:
        added["container.id"] = view.container_id
    if host_name is not None and "host.name" not in attributes:
        added["host.name"] = host_name
    if view.host_pid is not None and "process.vpid" not in attributes:
        own = attributes.get("process.pid")
        if type(own) is int and own == view.namespace_pid and own != view.host_pid:
            added["process.pid"] = view.host_pid
            added["process.vpid"] = own
    if not added:
        return resource
    return Resource({**attributes, **added}, resource.schema_url)


def read_bounded(dir_fd: int, name: str, limit: int) -> str | None:
    """A file's text (UTF-8, undecodable bytes replaced) read through ``dir_fd``, at most
    ``limit`` bytes; a last line cut by the limit is dropped. None if it cannot be read."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    chunks = []
    size = 0
    try:
        while size < limit:
            chunk = os.read(fd, limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size >= limit:
            whole = b"".join(chunks)
            chunks = [whole[: whole.rfind(b"\n") + 1]]
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def read_view(proc: str, pid: int) -> ProcessView | None:
    """The view of the process of thread ``pid`` from ``proc`` (``/proc``); None if there
    is no such thread (gone), or its ``status`` cannot be read."""
    if not 0 < pid < 2**31:
        return None
    try:
        dir_fd = os.open(f"{proc}/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        status = read_bounded(dir_fd, "status", STATUS_LIMIT)
        if status is None:
            return None
        thread_group = thread_group_of_status(status)
        if thread_group is None:
            return None
        return view_of(thread_group, read_bounded(dir_fd, "cgroup", CGROUP_LIMIT))
    finally:
        os.close(dir_fd)


@dataclass
class ViewStats:
    read: int = 0
    """Views read from ``/proc`` (first looks and refreshes)."""
    gone_pids: int = 0
    """Writer pids whose ``/proc`` entry was gone when the reader looked."""
    gone_records: int = 0
    """Records of those pids (no view: ``host.name`` alone added)."""
    forgotten: int = 0
    """Views forgotten, the oldest first, past :data:`MAX_PIDS`."""


class ProcessViews:
    """The view of each writer pid (see the module), kept per pid, for one reader: a plug-in
    of the join (``process_views``), which adds it to each record's resource."""

    def __init__(self, proc: str = "/proc", host_name: str | None = None) -> None:
        self.proc = proc
        self.host_name = host_name
        self.stats = ViewStats()
        self._views: dict[int, tuple[float, ProcessView, bool]] = {}
        """pid: (when read, view, gone)."""

    def view(self, pid: int, now: float) -> ProcessView:
        """The view of a record's writer ``pid``, at ``now`` (monotonic seconds): kept, or
        read (at most every :data:`REFRESH_SECONDS`)."""
        kept = self._views.get(pid)
        if kept is not None and now - kept[0] < REFRESH_SECONDS:
            if kept[2]:
                self.stats.gone_records += 1
            return kept[1]
        stats = self.stats
        stats.read += 1
        read = read_view(self.proc, pid)
        gone = read is None
        if gone:
            stats.gone_records += 1
            if kept is None or not kept[2]:
                stats.gone_pids += 1
        if kept is not None:
            del self._views[pid]  # read again: the newest, forgotten last
        elif len(self._views) >= MAX_PIDS:
            del self._views[next(iter(self._views))]
            stats.forgotten += 1
        view = NO_VIEW if read is None else read
        self._views[pid] = (now, view, gone)
        return view

    def refresh(self, pid: int) -> None:
        """Read ``pid``'s view again at its next record (it wrote its resource: maybe a
        new process with a reused pid)."""
        kept = self._views.get(pid)
        if kept is not None:
            self._views[pid] = (float("-inf"), kept[1], kept[2])


class ReaderNamespaces(NamedTuple):
    """Where the reader itself is."""

    pid: int | None
    """The inode of its pid namespace (``/proc/self/ns/pid``); None if unreadable."""
    uts: int | None
    """The inode of its UTS namespace (``/proc/self/ns/uts``); None if unreadable."""
    proc_is_ours: bool
    """``/proc`` shows its own pid namespace (``/proc/self`` is its pid), as
    :class:`.tracefs_instance.Namespace` checks before it judges an instance."""

    @classmethod
    def here(cls, proc: str = "/proc") -> ReaderNamespaces:
        def inode(name: str) -> int | None:
            try:
                return os.stat(f"{proc}/self/ns/{name}").st_ino
            except OSError:
                return None

        try:
            proc_is_ours = os.readlink(f"{proc}/self") == str(os.getpid())
        except OSError:
            proc_is_ours = False
        return cls(inode("pid"), inode("uts"), proc_is_ours)


HOST_PID_NEEDED = (
    "not adding container.id, host.name or the host's process.pid to resources: {why}, and "
    "the kernel gives each record its writer's pid in the host's pid namespace; run the "
    "reader in the host's pid namespace (Kubernetes hostPID: true, docker run --pid=host) "
    "to name containers"
)
HOST_UTS_NEEDED = (
    "not adding host.name to resources: this reader's host name is its container's; run it "
    "in the host's UTS namespace (Kubernetes hostNetwork: true, docker run --uts=host) to "
    "name the host"
)


UNSET_HOST_NAME = "(none)"
"""The kernel's node name until one is set (``UTS_NODENAME``): a host without a name."""


def _host_name() -> str | None:
    """The host's name; None for a host that has none (the kernel's ``(none)``)."""
    name = socket.gethostname()
    if name == UNSET_HOST_NAME:
        return None
    if 0 < len(name) <= 255 and name.isascii() and name.isprintable():
        return name
    return None


def live_views(
    proc: str = "/proc", namespaces: ReaderNamespaces | None = None
) -> tuple[ProcessViews | None, list[str]]:
    """The views for a live reader, or None where its pids cannot be looked up; and what
    to tell the operator (once, at start) about what is not added and why."""
    here = namespaces or ReaderNamespaces.here(proc)
    if here.pid != PROC_PID_INIT_INO:
        why = (
            "this reader is not in the host's pid namespace"
            if here.pid is not None
            else "this reader cannot tell its pid namespace (/proc/self/ns/pid)"
        )
        return None, [HOST_PID_NEEDED.format(why=why)]
    if not here.proc_is_ours:
        why = "this reader's /proc shows another pid namespace than the host's"
        return None, [HOST_PID_NEEDED.format(why=why)]
    if here.uts != PROC_UTS_INIT_INO:
        return ProcessViews(proc, None), [HOST_UTS_NEEDED]
    return ProcessViews(proc, _host_name()), []
