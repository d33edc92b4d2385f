# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""How many decoding workers by default: a module of its own, so that the command line
shows the default without importing the workers (:mod:`.worker_pool`)."""

from __future__ import annotations

import os

MAX_DEFAULT_WORKERS = 4
"""The default is the CPUs this process may run on, at most this many (past it, the main
process, which merges, rebuilds and writes, is the bottleneck)."""


def default_workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_WORKERS))
