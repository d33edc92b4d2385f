# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Common Schema times (RFC 3339 text) to nanoseconds since 1970.

The writers disagree on the shape, so one strict parser takes them all: Rust's chrono
writes 0, 3, 6 or 9 fraction digits and ``Z`` (older releases ``+00:00``); .NET writes at
most 6 (microseconds) with trailing zeros trimmed, and no ``.`` when none are left. Anything
else is refused (None): a time is never guessed.
"""

from __future__ import annotations

import re
from datetime import date

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
).fullmatch
_EPOCH_DAY = date(1970, 1, 1).toordinal()
_SECOND = 1_000_000_000
_U64_MAX = (1 << 64) - 1
MAX_TIME_TEXT = 64
"""Longer texts are not times (the longest RFC 3339 time is 35 characters)."""


def parse_time(text: str) -> int | None:
    """``text`` as nanoseconds since 1970 (UTC), or None if it is not an RFC 3339 time
    with a date and an offset, or falls before 1970 or past a u64 of nanoseconds. A leap
    second (``:60``, which chrono writes) reads as the second after ``:59``."""
    if len(text) > MAX_TIME_TEXT:
        return None
    match = _RFC3339(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match[i]) for i in range(1, 7))
    if hour > 23 or minute > 59 or second > 60:
        return None
    try:
        days = date(year, month, day).toordinal() - _EPOCH_DAY
    except ValueError:
        return None
    offset = 0
    if match[8] is None:
        off_hours, off_minutes = int(match[10]), int(match[11])
        if off_hours > 23 or off_minutes > 59:
            return None
        offset = (off_hours * 60 + off_minutes) * 60 * (1 if match[9] == "+" else -1)
    seconds = ((days * 24 + hour) * 60 + minute) * 60 + second - offset
    fraction = int((match[7] or "").ljust(9, "0"))
    nanoseconds = seconds * _SECOND + fraction
    if not 0 <= nanoseconds <= _U64_MAX:
        return None
    return nanoseconds
