# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The groups of kernel events ``--kernel`` takes, apart from the modules that read them:
the command line checks ``--kernel`` before it imports anything heavy."""

from __future__ import annotations

GROUPS = ("sched", "syscalls")
"""What ``--kernel`` can turn on: the scheduler's switches and wake-ups, and syscalls."""


def parse_groups(text: str) -> tuple[str, ...]:
    """``sched,syscalls`` -> the groups; raises ValueError naming an unknown one."""
    groups = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [g for g in groups if g not in GROUPS]
    if unknown or not groups:
        raise ValueError(
            f"unknown kernel group {', '.join(unknown) or repr(text)}: "
            f"choose from {', '.join(GROUPS)}"
        )
    return groups
