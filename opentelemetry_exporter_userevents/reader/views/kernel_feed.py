# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The kernel view's per-event loop: (trace-clock time, record) pairs decoded into the
timeline. It runs once per kernel event, the view's largest cost, so it is a function of
its own that the compiled build compiles (docs/building.md), while :class:`.KernelEvents`,
which :class:`.CaptureKernelEvents` extends, stays interpreted.

Any bytes are safe here: a record decides nothing but which thread's timeline gets which
event. One dictionary lookup and at most one unpacking per record (:mod:`.kernel_decoders`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from opentelemetry_exporter_userevents.reader.views.kernel_decoders import (
    ENTER,
    EXIT,
    FORK,
    SWITCH,
    WAKEUP,
    Decoder,
)
from opentelemetry_exporter_userevents.reader.views.kernel_processes import ProcessKey
from opentelemetry_exporter_userevents.reader.views.kernel_timeline import KernelTimeline

__all__ = ["feed"]

_COMMON_PID = struct.Struct("<i").unpack_from


def feed(
    records: list[tuple[int, memoryview]],
    decoders: dict[int, Decoder],
    offset: int,
    timeline: KernelTimeline,
    leader_exited: Callable[[ProcessKey], None],
) -> tuple[int, int]:
    """Feed ``records``, in time order, to ``timeline`` (their times less ``offset``);
    ``leader_exited`` hears of each process whose leader exited. (Records fed, records
    that did not decode.)"""
    decoder_of = decoders.get
    enter, leave, switch = timeline.syscall_enter, timeline.syscall_exit, timeline.switch
    count = undecodable = 0
    for stamp, record in records:
        size = len(record)
        decoder = decoder_of(record[0] | (record[1] << 8)) if size >= 8 else None
        if decoder is None or size < decoder[1]:
            undecodable += 1
            continue
        count += 1
        kind = decoder[0]
        if kind == ENTER:
            enter(stamp - offset, _COMMON_PID(record, 4)[0], decoder[2])
        elif kind == EXIT:
            leave(stamp - offset, _COMMON_PID(record, 4)[0])
        elif kind == SWITCH:
            prev, state, nxt = decoder[2](record)
            switch(stamp - offset, prev, state, nxt)
        elif kind == WAKEUP:
            timeline.wakeup(stamp - offset, decoder[2](record)[0], _COMMON_PID(record, 4)[0])
        elif kind == FORK:  # a listed thread started a thread or a child, listed too
            parent, child = decoder[2](record)
            timeline.fork(stamp - offset, parent, child)
        else:  # gone: a thread exited (the kernel unlists it); a leader, its process
            (tid,) = decoder[2](record)
            process = timeline.exit(stamp - offset, tid)
            if process is not None and process.pid == tid:
                leader_exited(process)
    return count, undecodable
