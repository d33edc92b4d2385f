# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The tracefs file system: where it is, event directories, instances, filters, pipes.

Also the one place that says why user_events cannot be used here (no tracefs, no
``user_events_data``, no rights), for writers and readers alike.
"""

from __future__ import annotations

import errno
import os
import re
import sys

from opentelemetry_exporter_userevents.abi.format import (
    EventFormat,
    command_fields,
    parse_format,
    split_multi_format_name,
)
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM


class Tracefs:
    """A tracefs mount: event directories, format files, enable switches, status."""

    CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def find(cls, mounts: str = "/proc/mounts") -> Tracefs | None:
        """Locate tracefs from ``mounts`` (tracefs, or debugfs's ``tracing``), else the usual
        paths; None if none looks like tracefs."""
        mounted: list[str] = []
        for point, kind in _mount_points(mounts):
            if kind == "tracefs":
                mounted.insert(0, point)
            elif kind == "debugfs":
                mounted.append(os.path.join(point, "tracing"))
        # tracefs's root is 0700 by default: an unprivileged user can see a mount point but
        # not its files, so a mounted tracefs counts even when its files cannot be read.
        for candidate in mounted:
            if os.path.isdir(candidate):
                return cls(candidate)
        for candidate in cls.CANDIDATES:
            if _exists(os.path.join(candidate, "README")) or _exists(
                os.path.join(candidate, "user_events_data")
            ):
                return cls(candidate)
        return None

    def event_dir(self, system: str, name: str, instance: str | None = None) -> str:
        root = os.path.join(self.path, "instances", instance) if instance else self.path
        return os.path.join(root, "events", system, name)

    def read_format(self, system: str, name: str) -> EventFormat:
        return parse_format(self.format_text(system, name))

    def format_text(self, system: str, name: str) -> str:
        """An event's ``format`` file, as text (what capture files carry)."""
        with open(os.path.join(self.event_dir(system, name), "format"), encoding="utf-8") as f:
            return f.read()

    def event_id(self, system: str, name: str) -> int:
        with open(os.path.join(self.event_dir(system, name), "id"), encoding="ascii") as f:
            return int(f.read())

    def events(self, system: str) -> list[str]:
        """Names of the events of ``system``; empty if there are none (or no such system)."""
        try:
            entries = os.listdir(os.path.join(self.path, "events", system))
        except FileNotFoundError:
            return []
        return sorted(e for e in entries if e not in ("enable", "filter"))

    def multi_format_versions(self, name: str) -> list[str]:
        """Every ``user_events_multi/<name>.<hex id>`` tracepoint, oldest id first."""
        found = []
        for event in self.events(USER_EVENTS_MULTI_SYSTEM):
            base, format_id = split_multi_format_name(event)
            if base == name and format_id is not None:
                found.append((format_id, event))
        return [event for _, event in sorted(found)]

    def find_multi_format(self, command: str) -> str | None:
        """The multi-format tracepoint whose format file has exactly ``command``'s fields."""
        try:
            wanted = command_fields(command)
        except (ValueError, IndexError):
            return None
        name = command.split(" ", 1)[0]
        matches = []
        for event in self.multi_format_versions(name):
            try:
                fmt = self.read_format(USER_EVENTS_MULTI_SYSTEM, event)
            except (OSError, ValueError):
                continue
            if [(f.type, f.name, f.size) for f in fmt.fields] == wanted:
                matches.append(event)
        return matches[-1] if matches else None

    def set_enabled(
        self, system: str, name: str, enabled: bool, instance: str | None = None
    ) -> None:
        """Attach (or detach) ftrace to an event, in the global buffer or an instance."""
        with open(os.path.join(self.event_dir(system, name, instance), "enable"), "w") as f:
            f.write("1" if enabled else "0")

    def status(self) -> str:
        """The text of ``user_events_status``: each tracepoint and who uses it."""
        with open(os.path.join(self.path, "user_events_status"), encoding="utf-8") as f:
            return f.read()

    # --- instances: private buffers for readers (Documentation/trace/ftrace.rst) ---------

    def instance_dir(self, instance: str) -> str:
        return os.path.join(self.path, "instances", instance)

    def instances(self) -> list[str]:
        """Names of the tracefs instances (each has its own ring buffer)."""
        try:
            return sorted(os.listdir(os.path.join(self.path, "instances")))
        except FileNotFoundError:
            return []

    def create_instance(self, instance: str) -> None:
        """``mkdir instances/<instance>``: a ring buffer of its own, every event disabled."""
        os.mkdir(self.instance_dir(instance))

    def remove_instance(self, instance: str) -> None:
        """``rmdir instances/<instance>``: the kernel disables its events and frees its buffer.
        EBUSY while a file of the instance is open."""
        os.rmdir(self.instance_dir(instance))

    def set_filter(self, system: str, name: str, expression: str, instance: str) -> None:
        """Set an event's filter in an instance; ValueError with the kernel's reason if the
        kernel rejects it (e.g. a field the event does not have)."""
        path = os.path.join(self.event_dir(system, name, instance), "filter")
        try:
            with open(path, "w") as f:
                f.write(expression)
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    reason = " ".join(f.read().split())
            except OSError:
                reason = ""
            message = f"the kernel rejected filter {expression!r} for {name}: {reason}"
            raise ValueError(message) from None

    # --- triggers: kernel-side histograms (Documentation/trace/histogram.rst) ----------

    def set_trigger(self, system: str, name: str, trigger: str, instance: str) -> None:
        """Add a trigger (``hist:keys=...``) to an event in an instance; ValueError with the
        kernel's reason (from the instance's ``error_log``) if the kernel rejects it.

        One ``write`` without ``O_TRUNC``: truncating the ``trigger`` file removes every
        trigger of the event, and a buffered file would write a rejected trigger twice."""
        path = os.path.join(self.event_dir(system, name, instance), "trigger")
        try:
            _write_once(path, trigger)
        except OSError as error:
            if error.errno not in (errno.EINVAL, errno.EEXIST):
                raise
            reason = _last_error(self._error_log(instance), name) or os.strerror(error.errno)
            message = f"the kernel rejected trigger {trigger!r} for {name}: {reason}"
            raise ValueError(message) from None

    def remove_trigger(self, system: str, name: str, trigger: str, instance: str) -> None:
        """Remove a trigger set by :meth:`set_trigger` (``!`` + the same text); the event
        stops counting and, if nothing else enables it, its writers see no listener."""
        path = os.path.join(self.event_dir(system, name, instance), "trigger")
        _write_once(path, "!" + trigger)

    def clear_triggers(self, system: str, name: str, instance: str) -> None:
        """Remove every trigger of an event in an instance (opening ``trigger`` with
        ``O_TRUNC`` does that), e.g. those of an instance whose maker was killed."""
        path = os.path.join(self.event_dir(system, name, instance), "trigger")
        os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))

    def read_hist(self, system: str, name: str, instance: str) -> str:
        """The text of an event's ``hist`` file: its hist triggers' tables (empty if none)."""
        path = os.path.join(self.event_dir(system, name, instance), "hist")
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def _error_log(self, instance: str) -> str:
        try:
            with open(os.path.join(self.instance_dir(instance), "error_log"), "rb") as f:
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def cpus(self, instance: str) -> list[int]:
        """The CPUs that have a ring buffer in the instance (``per_cpu/cpuN``)."""
        entries = os.listdir(os.path.join(self.instance_dir(instance), "per_cpu"))
        return sorted(int(e[3:]) for e in entries if e.startswith("cpu") and e[3:].isdigit())

    def trace_pipe_raw(self, instance: str, cpu: int) -> str:
        """The consuming binary reader of one CPU's ring buffer: one sub-buffer per read."""
        return os.path.join(self.instance_dir(instance), "per_cpu", f"cpu{cpu}", "trace_pipe_raw")

    def cpu_stats(self, instance: str, cpu: int) -> dict[str, int]:
        """The integer lines of ``per_cpu/cpuN/stats`` (entries, overrun, dropped events...)."""
        path = os.path.join(self.instance_dir(instance), "per_cpu", f"cpu{cpu}", "stats")
        stats = {}
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                value = value.strip()
                if value.isdigit():
                    stats[key.strip()] = int(value)
        return stats

    def set_buffer_size_kb(self, instance: str, size_kb: int) -> None:
        """The per-CPU ring buffer size of an instance, in KiB (the kernel rounds up)."""
        with open(os.path.join(self.instance_dir(instance), "buffer_size_kb"), "w") as f:
            f.write(str(size_kb))

    def set_buffer_percent(self, instance: str, percent: int) -> None:
        """How full a CPU's buffer must be before ``poll`` on its ``trace_pipe_raw`` wakes
        (``buffer_percent``, default 50); 0 wakes at the first record."""
        with open(os.path.join(self.instance_dir(instance), "buffer_percent"), "w") as f:
            f.write(str(percent))

    def buffer_percent(self, instance: str) -> int:
        """An instance's ``buffer_percent`` (see :meth:`set_buffer_percent`)."""
        with open(
            os.path.join(self.instance_dir(instance), "buffer_percent"), encoding="ascii"
        ) as f:
            return int(f.read().strip())

    def trace_clocks(self, instance: str) -> list[str]:
        """The clocks an instance's ring buffer can stamp records with (``trace_clock``)."""
        with open(os.path.join(self.instance_dir(instance), "trace_clock"), encoding="ascii") as f:
            return [name.strip("[]") for name in f.read().split()]

    def set_trace_clock(self, instance: str, clock: str) -> None:
        """Stamp the instance's records with ``clock`` (the kernel empties its buffer)."""
        with open(os.path.join(self.instance_dir(instance), "trace_clock"), "w") as f:
            f.write(clock)

    def set_option(self, instance: str, option: str, on: bool) -> None:
        """An instance's ``options/<option>`` switch (``event-fork``: children of listed
        pids are listed too, and exited ones unlisted)."""
        with open(os.path.join(self.instance_dir(instance), "options", option), "w") as f:
            f.write("1" if on else "0")

    def add_event_pids(self, instance: str, pids: list[int]) -> None:
        """Add thread ids to the instance's ``set_event_pid`` (its events are then recorded
        only for listed threads). Opened without ``O_TRUNC`` the kernel keeps the list and
        adds; a Python ``"a"`` file would seek to the end, which tracefs refuses (EINVAL)."""
        fd = os.open(os.path.join(self.instance_dir(instance), "set_event_pid"), os.O_WRONLY)
        try:
            os.write(fd, " ".join(str(pid) for pid in pids).encode("ascii"))
        finally:
            os.close(fd)

    def set_notrace_pids(self, instance: str, pids: list[int]) -> None:
        """Replace the instance's ``set_event_notrace_pid`` (Linux 5.8+): events of these
        threads are not recorded, listed in ``set_event_pid`` or not (with
        ``options/event-fork``, the threads they start neither). Empty: none left out."""
        path = os.path.join(self.instance_dir(instance), "set_event_notrace_pid")
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            if pids:
                os.write(fd, " ".join(str(pid) for pid in pids).encode("ascii"))
        finally:
            os.close(fd)

    def set_system_enabled(self, instance: str, system: str, enabled: bool) -> None:
        """Enable (or disable) every event of ``system`` in an instance at once."""
        with open(os.path.join(self.instance_dir(instance), "events", system, "enable"), "w") as f:
            f.write("1" if enabled else "0")

    def event_ids(self, system: str) -> dict[int, str]:
        """Event id -> name, for every event of ``system`` (those whose id file reads)."""
        ids = {}
        for name in self.events(system):
            try:
                ids[self.event_id(system, name)] = name
            except (OSError, ValueError):
                continue
        return ids

    def trace_marker(self, instance: str) -> str:
        """The file whose writes become ``ftrace/print`` records in the instance's buffer."""
        return os.path.join(self.instance_dir(instance), "trace_marker")

    def header_page(self) -> str:
        """``events/header_page``: the layout of a ring-buffer sub-buffer."""
        with open(os.path.join(self.path, "events", "header_page"), encoding="ascii") as f:
            return f.read()

    def header_event(self) -> str:
        """``events/header_event``: the ring buffer's event header (capture files carry it)."""
        with open(os.path.join(self.path, "events", "header_event"), encoding="ascii") as f:
            return f.read()

    def saved_cmdlines(self) -> str:
        """``saved_cmdlines``: pid -> command name, so tools can name writers."""
        try:
            with open(os.path.join(self.path, "saved_cmdlines"), encoding="utf-8") as f:
                return f.read()
        except OSError:
            return ""

    def sub_buffer_size(self, instance: str) -> int | None:
        """The instance's sub-buffer size in bytes (``buffer_subbuf_size_kb``, Linux 6.8+);
        None on older kernels, where it is ``header_page``'s."""
        path = os.path.join(self.instance_dir(instance), "buffer_subbuf_size_kb")
        try:
            with open(path, encoding="ascii") as f:
                return int(f.read()) * 1024
        except (OSError, ValueError):
            return None


def _exists(path: str) -> bool:
    try:
        os.stat(path)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _write_once(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _last_error(log: str, name: str) -> str:
    """The last ``error_log`` entry about event ``name``, on one line. An entry is
    ``[time] hist:SYSTEM:NAME: error: WHY``, then ``  Command: TEXT`` and a caret under
    the place the kernel stopped at."""
    entries: list[list[str]] = []
    for line in log.splitlines():
        if line.startswith("["):
            entries.append([line])
        elif entries:
            entries[-1].append(line)
    for entry in reversed(entries):
        head = entry[0].partition("] ")[2]
        if f":{name}: " not in head:
            continue
        reason = head.partition("error: ")[2].strip() or head.strip()
        command = next((x for x in entry[1:] if x.strip().startswith("Command: ")), None)
        caret = next((x for x in entry[1:] if x.strip() == "^"), None)
        if command is not None and caret is not None:
            start, place = command.index("Command: ") + len("Command: "), caret.index("^")
            at = command[place:].lstrip("=:,").split(":", 1)[0].split(",", 1)[0]
            if place > start and at:
                reason += f" (at {at!r})"
        return reason
    return ""


class TracefsError(Exception):
    """tracefs cannot be used here for reading; the message says why and what to do."""


DATA_FILE = "user_events_data"

NOT_MOUNTED = (
    "tracefs is not mounted (looked in /proc/mounts, /sys/kernel/tracing and "
    "/sys/kernel/debug/tracing); as root: mount -t tracefs nodev /sys/kernel/tracing"
)

NO_DATA_FILE = (
    "neither tracefs nor a bind-mounted user_events_data is here (looked in /proc/mounts "
    "for a tracefs mount, or a file named user_events_data mounted from one, and in "
    "/sys/kernel/tracing and /sys/kernel/debug/tracing): on a host, as root: mount -t "
    "tracefs nodev /sys/kernel/tracing; in a container, bind-mount the host's "
    "/sys/kernel/tracing/user_events_data and, if its path is not named user_events_data, "
    "set OTEL_EXPORTER_USER_EVENTS_DATA to it"
)


def no_user_events(data_path: str) -> str:
    return (
        f"{data_path} does not exist: this kernel ({os.uname().release}) has no "
        "user_events (it needs CONFIG_USER_EVENTS=y, Linux 6.4 or later)"
    )


def rights_message(what: str) -> str:
    """Why a reader was refused, and what it needs."""
    return (
        f"permission denied: the reader needs to {what}. Run it as root, or with "
        "CAP_SYS_ADMIN and write access to tracefs (tracefs is root-only by default)"
    )


def find_tracefs(path: str | None = None) -> Tracefs:
    """``path`` as tracefs, or the mounted one; TracefsError saying how to mount it."""
    found = Tracefs(path) if path else Tracefs.find()
    if found is None:
        raise TracefsError(NOT_MOUNTED)
    return found


def check_user_events(tracefs: Tracefs) -> None:
    """TracefsError unless tracefs is readable here and the kernel has user_events."""
    path = tracefs.path
    data_path = os.path.join(path, "user_events_data")
    if not os.path.exists(data_path):
        if not os.access(path, os.R_OK | os.X_OK):
            raise TracefsError(rights_message(f"read {path}"))
        raise TracefsError(no_user_events(data_path))


def find_data_file(mounts: str = "/proc/mounts") -> str | None:
    """A ``user_events_data`` file bind-mounted alone, as a container gets it: a tracefs
    mount whose mount point is a file named ``user_events_data``; None if there is none.

    Only that name is taken: another tracefs file bound alone (``trace_marker``) is not
    ours to write registrations to. Any other name needs OTEL_EXPORTER_USER_EVENTS_DATA.
    """
    for point, kind in _mount_points(mounts):
        if kind == "tracefs" and os.path.basename(point) == DATA_FILE and os.path.isfile(point):
            return point
    return None


_MOUNT_ESCAPE = re.compile(r"\\([0-7]{3})")


def _mount_points(mounts: str) -> list[tuple[str, str]]:
    """(mount point, file system type) of each line of ``mounts``; the kernel writes
    space, tab, newline and backslash in a mount point as octal escapes (``\\040``)."""
    points: list[tuple[str, str]] = []
    try:
        with open(mounts, encoding="utf-8", errors="replace") as file:
            for line in file:
                parts = line.split()
                if len(parts) >= 3:
                    point = _MOUNT_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), parts[1])
                    points.append((point, parts[2]))
    except OSError:
        pass
    return points


def open_user_events_data(
    path: str | os.PathLike[str] | None,
    data_path: str | os.PathLike[str] | None = None,
) -> tuple[Tracefs | None, int, str | None]:
    """Open ``user_events_data`` for writing: (tracefs or None, fd, None), or (tracefs or
    None, -1, why not) when user_events cannot be used here; never raises.

    The file is ``data_path`` if given; else the one in ``path`` (tracefs) or in the
    mounted tracefs; else one bind-mounted alone (:func:`find_data_file`). Writing needs
    only that file: tracefs is None when only the file is here (a container), and what
    would read tracefs (a multi-format event's tracefs name) says it is not known.
    """
    if not sys.platform.startswith("linux"):
        return None, -1, f"user_events needs Linux, this is {sys.platform}"
    tracefs = Tracefs(os.fspath(path)) if path is not None else Tracefs.find()
    if data_path is not None:
        data_file = os.fspath(data_path)
    elif tracefs is not None:
        data_file = os.path.join(tracefs.path, DATA_FILE)
    else:
        found = find_data_file()
        if found is None:
            return None, -1, NO_DATA_FILE
        data_file = found
    try:
        fd = os.open(data_file, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            reason = (
                f"{data_file} does not exist (OTEL_EXPORTER_USER_EVENTS_DATA names it)"
                if data_path is not None
                else no_user_events(data_file)
            )
        elif exc.errno in (errno.EACCES, errno.EPERM):
            search = os.path.dirname(data_file) or "."
            reason = (
                f"no permission to open {data_file} for writing: it is root-owned, mode 0640 "
                "by default; run as root or grant this user's group read-write access to it "
                f"and search (x) access to {search} (see the README)"
            )
        else:
            reason = f"cannot open {data_file}: {exc.strerror}"
        return tracefs, -1, reason
    return tracefs, fd, None
