# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Ctrl-C, SIGTERM and SIGHUP before a command takes its own handlers (``record`` and
``hist`` once they listen): each stops the reader with a line that says so and the exit
code the table lists (130, 143, 129). Python leaves SIGINT ignored where it came ignored (a
background job of ``sh``), and SIGTERM's default action kills without a word. Only
``signal`` and ``sys``: the entry point sets these first (:mod:`.entry_point`).
"""

from __future__ import annotations

import signal
import sys
from typing import Any


class StoppedEarly(BaseException):
    """SIGTERM or SIGHUP before the command listens (or while ``status`` or ``decode``
    runs): a BaseException, as KeyboardInterrupt, so that no ``except Exception`` takes it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.name = signal.Signals(signum).name
        self.code = 128 + signum


def _stop(signum: int, frame: object) -> None:
    raise StoppedEarly(signum)


def honour_stop_signals() -> dict[int, Any]:
    """Ctrl-C raises KeyboardInterrupt even where SIGINT came ignored; SIGTERM, and SIGHUP
    unless it came ignored (``nohup``), raise :class:`StoppedEarly`. A handler set already
    (a command's, or a test's) is left alone. Returns the handlers it replaced, for
    :func:`restore`."""
    replaced: dict[int, Any] = {}
    try:
        for signum, handler, takes_over in (
            (signal.SIGINT, signal.default_int_handler, (signal.SIG_IGN, signal.SIG_DFL)),
            (signal.SIGTERM, _stop, (signal.SIG_IGN, signal.SIG_DFL)),
            (signal.SIGHUP, _stop, (signal.SIG_DFL,)),
        ):
            previous = signal.getsignal(signum)
            if previous in takes_over or previous is None:
                replaced[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread (a test calling main): its signals are not ours
        pass
    return replaced


def restore(replaced: dict[int, Any]) -> None:
    """The handlers :func:`honour_stop_signals` replaced, back (``main`` called in-process,
    as the tests do)."""
    for signum, handler in replaced.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def said(stopped: BaseException) -> int:
    """The line for a stop before the command took its signals, and the exit code. A
    terminal that hung up (SIGHUP) may take no line: the code is the answer then."""
    if isinstance(stopped, StoppedEarly):
        line, code = f"otel-userevents: stopped ({stopped.name})\n", stopped.code
    else:
        line, code = "otel-userevents: interrupted\n", 130
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (OSError, ValueError):  # EIO from a closed terminal; a closed stderr
        pass
    return code
