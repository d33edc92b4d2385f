# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""An EventHeader tracepoint name, ``<provider>_L<level>K<keyword>[<options>]``, into its
parts.

As the C++ EventEnumerator reads it: the provider is all before the last ``_``; level and
keyword are lowercase hex; each option is an uppercase letter then digits and lowercase
letters. Unlike it, a level or keyword must have a digit and fit its size (8, 64 bits)
rather than wrap.
"""

from __future__ import annotations

import re

from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    BAD_TRACEPOINT_NAME,
    NAME_MAX,
    EventHeaderError,
    TracepointName,
)

_ATTRIBUTES = re.compile(r"L([0-9a-f]+)K([0-9a-f]+)((?:[A-Z][0-9a-z]*)*)").fullmatch


def parse_tracepoint_name(name: str) -> TracepointName:
    """The parts of ``name`` (without its ``user_events:`` system); raises
    :class:`EventHeaderError` if it does not follow the EventHeader naming rules."""
    if len(name.encode("utf-8", "surrogatepass")) >= NAME_MAX or "\0" in name:
        raise EventHeaderError(BAD_TRACEPOINT_NAME)
    underscore = name.rfind("_")
    match = _ATTRIBUTES(name, underscore + 1) if underscore >= 0 else None
    if match is None:
        raise EventHeaderError(BAD_TRACEPOINT_NAME)
    level, keyword = int(match[1], 16), int(match[2], 16)  # at most 255 digits
    if level > 0xFF or keyword >> 64:
        raise EventHeaderError(BAD_TRACEPOINT_NAME)
    return TracepointName(name[:underscore], level, keyword, match[3])


def is_eventheader_name(name: str) -> bool:
    """Whether ``name`` follows the EventHeader naming rules."""
    try:
        parse_tracepoint_name(name)
    except EventHeaderError:
        return False
    return True
