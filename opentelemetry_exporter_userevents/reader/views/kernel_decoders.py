# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""How each kernel event the view reads is decoded: a tuple per event id, built once from
its ``format``, so that :meth:`.KernelEvents.feed` does one dictionary lookup and at most
one unpacking per record (it runs once per kernel event: the view's largest cost).

A decoder is ``(kind, needs, what)``: ``needs`` the bytes a record must have for its
fields, ``what`` the syscall's name (``ENTER``, ``EXIT``) or a function that unpacks the
event's fields, in the order asked, from their offsets and sizes in the format (one
``struct`` for all of them).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from opentelemetry_exporter_userevents.abi.format import EventFormat
from opentelemetry_exporter_userevents.abi.sched import (
    SCHED_PROCESS_EXIT,
    SCHED_PROCESS_FORK,
    SCHED_SWITCH,
    SCHED_WAKEUP,
    SCHED_WAKEUP_NEW,
    SYS_ENTER,
    SYS_EXIT,
)

ENTER, EXIT, SWITCH, WAKEUP, FORK, GONE = range(6)
"""The kinds of event: a syscall's entry and exit, ``sched_switch``, a wake-up,
``sched_process_fork``, ``sched_process_exit``."""
SCHED_EVENTS: dict[str, tuple[int, tuple[str, ...]]] = {
    SCHED_SWITCH: (SWITCH, ("prev_pid", "prev_state", "next_pid")),
    SCHED_WAKEUP: (WAKEUP, ("pid",)),
    SCHED_WAKEUP_NEW: (WAKEUP, ("pid",)),
}
"""The ``sched`` group's events: each one's kind, and the fields read of it."""
LIFE_EVENTS: dict[str, tuple[int, tuple[str, ...]]] = {
    SCHED_PROCESS_FORK: (FORK, ("parent_pid", "child_pid")),
    SCHED_PROCESS_EXIT: (GONE, ("pid",)),
}
"""A thread's birth and exit, read whatever the groups."""
HEADER_SIZE = 8
"""``common_type``, ``common_flags``, ``common_preempt_count``, ``common_pid``."""

Decoder = tuple[int, int, Any]
_CODES = {1: "b", 2: "h", 4: "i", 8: "q"}


def sched_decoder(fmt: EventFormat) -> Decoder | None:
    """The decoder of a ``sched`` event the view reads (:data:`SCHED_EVENTS`,
    :data:`LIFE_EVENTS`), None for another; raises KeyError (a field missing) or
    ValueError (not an integer) for a format without what it reads."""
    known = SCHED_EVENTS.get(fmt.name) or LIFE_EVENTS.get(fmt.name)
    return fields_decoder(known[0], fmt, *known[1]) if known is not None else None


def syscall_event_decoder(name: str) -> Decoder | None:
    """The decoder of ``syscalls/<name>``: a syscall's entry or exit, None for another."""
    if name.startswith(SYS_ENTER):
        return syscall_decoder(ENTER, name[len(SYS_ENTER) :])
    if name.startswith(SYS_EXIT):
        return syscall_decoder(EXIT, name[len(SYS_EXIT) :])
    return None


def syscall_decoder(kind: int, name: str) -> Decoder:
    """A syscall's entry or exit: only its ``common_pid`` is read."""
    return (kind, HEADER_SIZE, name)


def fields_decoder(kind: int, fmt: EventFormat, *names: str) -> Decoder:
    """An event whose integer fields ``names`` are read (ValueError for a field that is
    not an integer of 1, 2, 4 or 8 bytes)."""
    fields = [fmt.field(name) for name in names]
    for f in fields:
        if f.size not in _CODES:
            raise ValueError(f"{fmt.name}.{f.name}: an integer of {f.size} bytes")
    order = sorted(range(len(fields)), key=lambda i: fields[i].offset)
    code, at = "<", 0
    for i in order:
        f = fields[i]
        if f.offset < at:  # overlapping fields: one unpacking each
            return (kind, _needs(fields), _one_by_one(fields))
        code += f"{f.offset - at}x" if f.offset > at else ""
        letter = _CODES[f.size]
        code += letter if f.signed else letter.upper()
        at = f.offset + f.size
    unpack = struct.Struct(code).unpack_from
    if order == list(range(len(fields))):
        return (kind, at, unpack)
    pick = itemgetter(*[order.index(i) for i in range(len(fields))])
    return (kind, at, lambda record: pick(unpack(record)))


def _needs(fields: list[Any]) -> int:
    return int(max(f.offset + f.size for f in fields))


def _one_by_one(fields: list[Any]) -> Callable[[Any], tuple[int, ...]]:
    readers = []
    for f in fields:
        letter = _CODES[f.size]
        readers.append((f.offset, struct.Struct("<" + (letter if f.signed else letter.upper()))))
    return lambda record: tuple(s.unpack_from(record, at)[0] for at, s in readers)
