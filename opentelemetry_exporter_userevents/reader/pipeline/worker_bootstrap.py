# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Where a decoding worker (``--workers``, :mod:`.worker_pool`) starts: it ignores Ctrl-C,
SIGTERM and SIGHUP before anything else, so a stop never kills a worker that holds pages
the kernel no longer has (the main process decides when workers stop: it closes their
pipe).

Before :func:`main` runs, a spawned interpreter imports this package (seconds, for a few
workers on a loaded host); a stop in that window must not kill it either. So the main
process starts workers with these signals blocked (:func:`stop_signals_blocked`; the mask
is inherited across ``fork`` and ``exec``, as CPython's own resource tracker is started),
a stop sent meanwhile stays pending in the worker, and :func:`main` discards it by ignoring
the signals before it unblocks them. This module imports nothing but :mod:`signal`.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""What stops the reader (:func:`.common.stop_signals`): never a worker."""


def main(*args: Any) -> None:
    """A worker's entry point (the target of its process): signals first, then the loop
    (:func:`.worker_loop.serve`, given ``args``)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)  # a pending one is discarded
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    from opentelemetry_exporter_userevents.reader.pipeline.worker_loop import serve  # noqa: PLC0415

    serve(*args)


@contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """In the main process, around starting a worker: the signals blocked in this thread
    (so in the worker from its first instruction); one that comes meanwhile is delivered
    here when they are unblocked, never lost."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
