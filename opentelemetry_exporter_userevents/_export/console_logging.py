# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The application's console ``logging`` output, kept when the configurator attaches a
handler to the root logger.

Python prints a warning that no handler takes through its last-resort handler (stderr,
``WARNING`` and up, the message alone) only while no logger on the way has a handler: the
drop-in line's ``logging`` handler on the root logger would silence it. The configurator
adds, never takes away, so where the root logger had no handler before, that same
last-resort handler is put beside ours: the console prints what it printed before.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def console_logging_kept() -> Iterator[None]:
    """While configuring: if the root logger had no handler and gets one, the last-resort
    handler (unless the application turned it off: ``logging.lastResort = None``) is
    added to it."""
    root = logging.getLogger()
    had_handlers = bool(root.handlers)
    try:
        yield
    finally:
        last_resort = logging.lastResort
        if not had_handlers and root.handlers and last_resort is not None:
            if last_resort not in root.handlers:
                root.addHandler(last_resort)
