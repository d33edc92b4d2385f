# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The scheduler's and the syscalls' tracepoints, as the reader's kernel view reads them.

``sched/sched_switch`` reports the state a thread left the CPU in (``prev_state``): Linux
6.12 ``__trace_sched_switch_state`` gives ``TASK_REPORT_MAX`` (0x100, printed ``R+``) when
the thread was preempted, else ``1 << (index - 1)`` of its reported state (0 ``R``: still
runnable, as after ``sched_yield``; 0x1 ``S``; 0x2 ``D``; 0x80 ``I``, an idle
uninterruptible sleep). The kernel counts a switch as voluntary (``nvcsw`` in
``/proc/<tid>/status``) exactly when the thread was not preempted and not runnable, that
is when ``prev_state`` is neither 0 nor 0x100.

``syscalls/sys_enter_<name>`` and ``sys_exit_<name>`` name the syscall in the event itself;
the records carry ``__syscall_nr`` at offset 8, the exit its ``ret`` after it. Field
positions are taken from each ``format`` file (offset and size), never assumed.
"""

from __future__ import annotations

SCHED_SYSTEM = "sched"
SYSCALLS_SYSTEM = "syscalls"
SCHED_SWITCH = "sched_switch"
SCHED_WAKEUP = "sched_wakeup"
SCHED_WAKEUP_NEW = "sched_wakeup_new"
SCHED_PROCESS_FORK = "sched_process_fork"
SCHED_PROCESS_EXIT = "sched_process_exit"
FTRACE_SYSTEM = "ftrace"
FTRACE_PRINT = "print"
"""``trace_marker`` writes; the reader stamps its clock check with them."""
SYS_ENTER = "sys_enter_"
SYS_EXIT = "sys_exit_"
EVENT_FORK = "event-fork"

TASK_REPORT_MAX = 0x100
"""``prev_state`` of a preempted thread."""

ON_CPU = 0
RUNNABLE = 1
"""Ready to run, waiting for a CPU (preempted, woken, or yielded)."""
SLEEPING = 2
"""``S``: an interruptible sleep (a futex, a socket, a timer)."""
BLOCKED = 3
"""``D`` (and ``I``): an uninterruptible wait (I/O, some kernel locks)."""
OTHER = 4
"""Stopped, traced, exiting, parked."""

STATE_NAMES = {ON_CPU: "on_cpu", RUNNABLE: "runnable", SLEEPING: "sleeping",
               BLOCKED: "blocked", OTHER: "other"}  # fmt: skip


def switched_out_state(prev_state: int) -> int:
    """What a thread is while off the CPU, from the ``prev_state`` it left with."""
    if prev_state in (0, TASK_REPORT_MAX):
        return RUNNABLE
    if prev_state & 0x1:
        return SLEEPING
    if prev_state & (0x2 | 0x80):
        return BLOCKED
    return OTHER


def is_voluntary(prev_state: int) -> bool:
    """Whether the kernel counts this switch as voluntary (``nvcsw``) or not (``nivcsw``)."""
    return prev_state not in (0, TASK_REPORT_MAX)
