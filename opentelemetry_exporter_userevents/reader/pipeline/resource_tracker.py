# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""CPython's multiprocessing resource tracker, which spawned workers make start and nothing
of the reader uses: stopped with the workers, so a command that started them exits leaving
no process behind it, holding its standard output and error open (a caller reading them to
their end waits for it). The tracker's handle is private to CPython: read with care."""

from __future__ import annotations

from multiprocessing import resource_tracker


def tracker_pid() -> int | None:
    """The resource tracker's pid if this process started one."""
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    return getattr(tracker, "_pid", None)


def stop_tracker() -> None:
    """Stop the resource tracker, if it runs."""
    stop = getattr(getattr(resource_tracker, "_resource_tracker", None), "_stop", None)
    if stop is not None:
        try:
            stop()
        except (OSError, ChildProcessError):
            pass  # gone already
