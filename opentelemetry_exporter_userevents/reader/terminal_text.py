# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Text from records, captures and tracefs made safe for an operator's terminal.

Any local process that may write user_events chooses the texts the reader shows (span and
service names, status descriptions, severity texts, event names, tracefs lines), and the
reader runs as root. A raw ``ESC ] 0 ; ... BEL`` retitles the terminal, and CSI sequences
move the cursor or rewrite lines already shown. So every text a human reads goes through
:func:`printable` first: C0 controls, DEL, C1 controls (which some terminals take as ESC +
a letter) and every other non-printable character become their Python escapes, on one line.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import TextIO

_UNSAFE = re.compile(r"[^\x20-\x7e\xa0-\U0010ffff]|[^\S ]|[\u2028\u2029\u200e\u200f\u202a-\u202e]")
"""C0 (incl. ESC, newline, tab), DEL, C1, other whitespace but space, and the line and
direction marks that reorder or break what follows."""


def printable(text: str) -> str:
    """``text`` on one line, with no character a terminal acts on: each such character
    is replaced by its escape (``\\x1b``, ``\\n``, ``\\x9b``, ``\\u202e``)."""
    if text.isprintable() and _UNSAFE.search(text) is None:
        return text
    return "".join(c if c.isprintable() and _UNSAFE.match(c) is None else _escape(c) for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x80:
        return repr(char)[1:-1]
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def cut(text: str, width: int) -> str:
    """:func:`printable` ``text``, at most ``width`` characters (the last one ``…`` when cut)."""
    safe = printable(text)
    return safe if len(safe) <= width else safe[: width - 1] + "…"


class PrintableFormatter(logging.Formatter):
    """Log lines on one line each, message and exception escaped: the SDK and the OTLP
    encoder log texts from records (``Failed to encode key <key>``), and Python's
    last-resort handler would print them raw to the operator's terminal."""

    def format(self, record: logging.LogRecord) -> str:
        message = printable(record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            message += f" ({type(error).__name__}: {printable(str(error))})"
        return f"otel-userevents: {record.levelname.lower()}: {record.name}: {message}"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time, as Python's last resort does."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def escape_logging() -> logging.Handler:
    """Send warnings and errors logged by the libraries the reader uses to stderr through
    :class:`PrintableFormatter`, once per process."""
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, _StderrHandler):
            return handler
    handler = _StderrHandler()
    handler.setFormatter(PrintableFormatter())
    handler.setLevel(logging.WARNING)
    root.addHandler(handler)
    return handler
