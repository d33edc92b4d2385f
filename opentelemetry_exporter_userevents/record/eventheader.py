# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader's wire contract: the header, its flags, extensions, field encodings and
formats, the tracepoint's fields and name.

EventHeader is Microsoft's convention for user_events (``libeventheader-tracepoint``'s
``eventheader.h``, LinuxTracepoints 1.4.0): other OpenTelemetry exporters write it, our
exporters write it on request (``OTEL_EXPORTER_USER_EVENTS_FORMAT=eventheader``) and the
reader decodes it. The values here are that header's; the writer and the reader share them.
"""

from __future__ import annotations

import re
from enum import IntEnum, IntFlag

from opentelemetry_exporter_userevents.record.schema import Field, Schema

HEADER_SIZE = 8
"""``struct eventheader``: flags, version, id, tag, opcode, level."""
EXTENSION_HEADER_SIZE = 4
"""``struct eventheader_extension``: size, kind."""
NAME_MAX = 256
"""``EVENTHEADER_NAME_MAX``: a tracepoint name is shorter."""


class HeaderFlags(IntFlag):
    POINTER64 = 0x01
    LITTLE_ENDIAN = 0x02
    EXTENSION = 0x04


KNOWN_FLAGS = int(HeaderFlags.POINTER64 | HeaderFlags.LITTLE_ENDIAN | HeaderFlags.EXTENSION)
"""An int: ``~`` of an IntFlag keeps only its own bits."""


class ExtensionKind(IntEnum):
    INVALID = 0
    METADATA = 1
    ACTIVITY_ID = 2


EXTENSION_KIND_MASK = 0x7FFF
EXTENSION_CHAIN = 0x8000
"""Another extension block follows this one."""


class Opcode(IntEnum):
    INFO = 0
    ACTIVITY_START = 1
    ACTIVITY_STOP = 2
    COLLECTION_START = 3
    COLLECTION_STOP = 4
    EXTENSION = 5
    REPLY = 6
    RESUME = 7
    SUSPEND = 8
    SEND = 9
    RECEIVE = 0xF0


class Encoding(IntEnum):
    """The low 5 bits of a field's encoding byte: how long its value is."""

    INVALID = 0
    STRUCT = 1
    VALUE8 = 2
    VALUE16 = 3
    VALUE32 = 4
    VALUE64 = 5
    VALUE128 = 6
    ZSTRING_CHAR8 = 7
    ZSTRING_CHAR16 = 8
    ZSTRING_CHAR32 = 9
    STRING_LENGTH16_CHAR8 = 10
    STRING_LENGTH16_CHAR16 = 11
    STRING_LENGTH16_CHAR32 = 12
    BINARY_LENGTH16_CHAR8 = 13


ENCODING_MASK = 0x1F
ENCODING_CARRAY = 0x20
"""A constant-length array: its count (u16, never 0) follows in the metadata."""
ENCODING_VARRAY = 0x40
"""A variable-length array: its count (u16) comes first in the payload."""
ENCODING_CHAIN = 0x80
"""A format byte follows the encoding byte."""


class Format(IntEnum):
    """The low 7 bits of a field's format byte: how its value reads. Unknown formats read
    as the encoding's default."""

    DEFAULT = 0
    UNSIGNED_INT = 1
    SIGNED_INT = 2
    HEX_INT = 3
    ERRNO = 4
    PID = 5
    TIME = 6
    BOOLEAN = 7
    FLOAT = 8
    HEX_BYTES = 9
    STRING8 = 10
    STRING_UTF = 11
    STRING_UTF_BOM = 12
    STRING_XML = 13
    STRING_JSON = 14
    UUID = 15
    PORT = 16
    IP_ADDRESS = 17
    IP_ADDRESS_OBSOLETE = 18


FORMAT_MASK = 0x7F
FORMAT_CHAIN = 0x80
"""A field tag (u16) follows the format byte."""


LEVELS = range(1, 6)
"""The levels the exporters use: 1 critical, 2 error, 3 warning, 4 informational, 5
verbose (``event_level``)."""

TRACEPOINT = Schema(
    "eventheader",
    [
        Field("eventheader_flags", "u8", "HeaderFlags."),
        Field("version", "u8", "The event's version (0: ours)."),
        Field("id", "u16", "The event's id (0: ours)."),
        Field("tag", "u16", "The event's tag (0: ours)."),
        Field("opcode", "u8", "An Opcode (INFO: ours)."),
        Field("level", "u8", "The level the tracepoint's name says."),
    ],
    "The fields every EventHeader tracepoint registers (``EVENTHEADER_COMMAND_TYPES``): "
    "the header; the rest of the record is described by the header's extensions.",
)
TRACEPOINT_FIELDS = TRACEPOINT.field_list
"""``u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level``."""

PROVIDER_NAME_MAX = 233
"""A provider name is shorter than 234 bytes, so that ``_L<level>K<keyword>`` and options
still fit NAME_MAX (``EVENTHEADER_NAME_MAX`` less their longest)."""

_PROVIDER = re.compile(r"[A-Za-z0-9_]+").fullmatch


def is_provider_name(text: str) -> bool:
    """A provider name EventHeader's writers take: ASCII letters, digits and ``_``, at most
    PROVIDER_NAME_MAX of them."""
    return len(text) <= PROVIDER_NAME_MAX and _PROVIDER(text) is not None


def tracepoint_name(provider: str, level: int, keyword: int) -> str:
    """``<provider>_L<level>K<keyword>``, level and keyword in lowercase hex."""
    return f"{provider}_L{level:x}K{keyword:x}"


def tracepoint_command(provider: str, level: int, keyword: int) -> str:
    """The registration command of a provider's tracepoint (single-format: EventHeader
    readers find it by its name alone)."""
    return f"{tracepoint_name(provider, level, keyword)} {TRACEPOINT_FIELDS}"
