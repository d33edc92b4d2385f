# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Locks that a forked child gets back unlocked.

When one thread forks while another holds a lock, the child inherits the lock held by a
thread that does not exist there: its first export would block forever. Every object
registered here gets a fresh ``_lock`` in each child, before the child's code runs.
"""

from __future__ import annotations

import os
import threading
import weakref

_owners: dict[int, weakref.ref[object]] = {}  # by id: owners need not be hashable


def register(owner: object) -> None:
    """Give ``owner`` (which has a ``_lock``) a new, unlocked ``_lock`` in each forked child."""
    key = id(owner)
    _owners[key] = weakref.ref(owner, lambda _: _owners.pop(key, None))


def _renew_locks() -> None:
    for ref in list(_owners.values()):
        owner = ref()
        if owner is not None:
            owner._lock = threading.Lock()  # type: ignore[attr-defined]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks)
