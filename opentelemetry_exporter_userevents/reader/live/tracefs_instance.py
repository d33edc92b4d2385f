# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The private tracefs instance of a reader (``record``) or a hist collector (``hist``):
made at start, what was enabled in it undone and the instance removed at close, and one
left by a killed maker removed by the next start, in the same pid namespace only.

Names: ``<prefix><pid>.<start>.<n>.pidns<inode>``: the maker's pid and start time (clock
ticks after boot, from ``/proc/<pid>/stat``), which tell it from a later process with the
same pid, a number unique in the process, and the inode of its pid namespace
(``/proc/self/ns/pid``). tracefs is one for the whole machine, but a pid means something
only in its namespace: a reader in a container that looked up a host reader's pid in its
own ``/proc`` would find no such process, or another one, and remove a live reader's
instance (and its hist triggers). So an instance is judged only by a reader in the pid
namespace that made it, and only when that reader's ``/proc`` shows its own namespace
(``/proc/self`` is its pid); every other instance is left alone and reported (``status``
lists them, with the reason).

Names of earlier releases (``<prefix><pid>.<start>.<n>``, no namespace) do not say which
namespace made them, so they are never removed: a wrong guess would take a live reader's
buffer and triggers away, while leaving one costs only the tracepoints it keeps enabled
until someone removes it (``otel-userevents status`` lists it; ``rmdir`` removes it once no
reader of an earlier release runs). Readers of earlier releases do not match the new names
either (their pattern ends after ``<n>``), so they leave this release's instances alone.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry_exporter_userevents.abi.tracefs import (
    Tracefs,
    TracefsError,
    check_user_events,
    rights_message,
)

_instances_made = itertools.count()

LIVE = "live"
STALE = "stale"
OTHER_NAMESPACE = "another pid namespace"
OLD_NAME = "an earlier release's name, without its pid namespace"
PROC_NOT_OURS = "this reader's /proc shows another pid namespace"


@dataclass(frozen=True)
class InstanceName:
    """What an instance's name says about its maker; ``pid_namespace`` is None in the
    names of earlier releases, 0 when the maker could not read its own."""

    pid: int
    start: int
    number: int
    pid_namespace: int | None


@dataclass(frozen=True)
class Namespace:
    """The pid namespace this process judges instances in."""

    inode: int | None
    """Of ``/proc/self/ns/pid``; None when it cannot be read."""
    proc_is_ours: bool
    """``/proc`` shows this process's pid namespace (``/proc/self`` is ``os.getpid()``)."""

    @classmethod
    def here(cls) -> Namespace:
        try:
            inode: int | None = os.stat("/proc/self/ns/pid").st_ino
        except OSError:
            inode = None
        try:
            proc_is_ours = os.readlink("/proc/self") == str(os.getpid())
        except OSError:
            proc_is_ours = False
        return cls(inode, proc_is_ours)


def process_start(pid: int) -> int | None:
    """A process's start time (clock ticks after boot), which tells it from a later
    process with the same pid; None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def new_instance_name(prefix: str, namespace: Namespace | None = None) -> str:
    """``<prefix><pid>.<start>.<n>.pidns<inode>``: unique, and tells a reader in the same
    pid namespace whether its maker lives."""
    inode = (namespace or Namespace.here()).inode
    pid = os.getpid()
    return f"{prefix}{pid}.{process_start(pid) or 0}.{next(_instances_made)}.pidns{inode or 0}"


def parse_instance_name(prefix: str, name: str) -> InstanceName | None:
    """What a name made by :func:`new_instance_name` (or an earlier release) says; None
    for another name."""
    pattern = rf"^{re.escape(prefix)}(\d+)\.(\d+)\.(\d+)(?:\.pidns(\d+))?$"
    match = re.match(pattern, name)
    if match is None:
        return None
    ns = int(match[4]) if match[4] is not None else None
    return InstanceName(int(match[1]), int(match[2]), int(match[3]), ns)


def judge(
    name: InstanceName,
    namespace: Namespace,
    start_of: Callable[[int], int | None] = process_start,
) -> str:
    """:data:`LIVE` or :data:`STALE` for an instance made in this pid namespace; else why it
    cannot be judged here (:data:`OLD_NAME`, :data:`OTHER_NAMESPACE`,
    :data:`PROC_NOT_OURS`)."""
    if name.pid_namespace is None:
        return OLD_NAME
    if not name.pid_namespace or namespace.inode is None or name.pid_namespace != namespace.inode:
        return OTHER_NAMESPACE
    if not namespace.proc_is_ours:
        return PROC_NOT_OURS
    return LIVE if start_of(name.pid) == name.start else STALE


def judge_instances(
    tracefs: Tracefs, prefix: str, namespace: Namespace | None = None
) -> dict[str, str]:
    """Every instance named with ``prefix``, and its judgment (:func:`judge`)."""
    namespace = namespace or Namespace.here()
    judged = {}
    for instance in tracefs.instances():
        parsed = parse_instance_name(prefix, instance)
        if parsed is not None:
            judged[instance] = judge(parsed, namespace)
    return judged


@dataclass
class Sweep:
    """What :func:`remove_stale_instances` did."""

    removed: list[str] = field(default_factory=list)
    unread: dict[str, int] = field(default_factory=dict)
    """Records each removed instance still held (its CPUs' ``entries``): written after its
    reader was killed, never read, lost with it."""
    left_alone: dict[str, str] = field(default_factory=dict)
    """Instances it could not judge, and why (another pid namespace, an earlier release's
    name)."""


def remove_stale_instances(
    tracefs: Tracefs,
    prefix: str,
    keep: str,
    before_removal: Callable[[str], None] | None = None,
    namespace: Namespace | None = None,
) -> Sweep:
    """Remove the instances named with ``prefix`` whose maker, in this pid namespace, is
    gone (killed before it could clean up), except ``keep``. ``before_removal(instance)``
    may undo what would keep one busy (hist triggers)."""
    sweep = Sweep()
    for instance, verdict in judge_instances(tracefs, prefix, namespace).items():
        if instance == keep or verdict == LIVE:
            continue
        if verdict != STALE:
            sweep.left_alone[instance] = verdict
            continue
        try:
            if before_removal is not None:
                before_removal(instance)
            unread = _entries(tracefs, instance)
            tracefs.remove_instance(instance)
            sweep.removed.append(instance)
            sweep.unread[instance] = unread
        except OSError:
            pass  # EBUSY (a file still open) or raced with another reader
    return sweep


def _entries(tracefs: Tracefs, instance: str) -> int:
    """Records in ``instance``'s buffers (each CPU's ``entries``; 0 where unreadable)."""
    total = 0
    try:
        cpus = tracefs.cpus(instance)
    except OSError:
        return 0
    for cpu in cpus:
        try:
            total += max(0, tracefs.cpu_stats(instance, cpu).get("entries", 0))
        except OSError:
            continue
    return total


class TracefsInstance:
    """One private instance: :meth:`create`, then :meth:`enable` or :meth:`set_trigger`
    tracepoints in it; :meth:`close` undoes them and removes it (idempotent)."""

    def __init__(
        self,
        tracefs: Tracefs,
        prefix: str,
        before_stale_removal: Callable[[str], None] | None = None,
    ) -> None:
        self.tracefs = tracefs
        self.prefix = prefix
        self.name = new_instance_name(prefix)
        self.before_stale_removal = before_stale_removal
        self.removed_stale: list[str] = []
        self.unread_in_stale = 0
        """Records the removed stale instances still held (lost with them: see
        :class:`Sweep`)."""
        self.left_alone: dict[str, str] = {}
        """Instances with our prefix that this one could not judge (see the module)."""
        self.cleanup_error: str | None = None
        self.created = False
        self.closed = False
        self._undo: dict[tuple[str, str], Callable[[], None]] = {}

    def create(self) -> None:
        """Check the rights, remove stale instances, make ours (again, after a close)."""
        check_user_events(self.tracefs)
        instances = os.path.join(self.tracefs.path, "instances")
        if not os.access(instances, os.W_OK | os.X_OK):
            raise TracefsError(rights_message(f"create a tracefs instance in {instances}"))
        sweep = remove_stale_instances(
            self.tracefs, self.prefix, self.name, self.before_stale_removal
        )
        self.removed_stale, self.left_alone = sweep.removed, sweep.left_alone
        self.unread_in_stale = sum(sweep.unread.values())
        try:
            self.tracefs.create_instance(self.name)
        except PermissionError:
            raise TracefsError(rights_message("create a tracefs instance")) from None
        except FileExistsError:  # ours from an earlier start in this process
            pass
        self.created = True
        self.closed = False

    def enable(self, system: str, name: str) -> None:
        """Enable a tracepoint in the instance (disabled again at :meth:`close`)."""
        self.tracefs.set_enabled(system, name, True, self.name)
        self._undo[(system, name)] = lambda: self.tracefs.set_enabled(
            system, name, False, self.name
        )

    def set_trigger(self, system: str, name: str, trigger: str) -> None:
        """Set a trigger on a tracepoint in the instance (removed at :meth:`close`)."""
        self.tracefs.set_trigger(system, name, trigger, self.name)
        self._undo[(system, name)] = lambda: self.tracefs.remove_trigger(
            system, name, trigger, self.name
        )

    def close(self) -> None:
        """Undo what was enabled or set, and remove the instance; if it cannot be removed
        (EBUSY: someone holds one of its files open), :attr:`cleanup_error` says so."""
        if self.closed or not self.created:
            self.closed = True
            return
        self.closed = True
        for undo in self._undo.values():
            try:
                undo()
            except OSError:
                pass  # the event is gone already
        self._undo = {}
        try:
            self.tracefs.remove_instance(self.name)
        except FileNotFoundError:
            pass
        except OSError as error:
            self.cleanup_error = f"could not remove instance {self.name}: {error}"


class InstanceOwner:
    """What a reader and a hist collector tell about the instance they own (their
    ``tracefs_instance``)."""

    tracefs_instance: TracefsInstance

    @property
    def removed_stale(self) -> list[str]:
        """Instances of killed owners (in this pid namespace) removed at start."""
        return self.tracefs_instance.removed_stale

    @property
    def left_alone(self) -> dict[str, str]:
        """Owners' instances this one could not judge at start, and why."""
        return self.tracefs_instance.left_alone

    @property
    def cleanup_error(self) -> str | None:
        """Why the instance could not be removed at close, if it could not."""
        return self.tracefs_instance.cleanup_error
