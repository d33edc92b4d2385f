# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The Linux kernel contract, and nothing else: no OpenTelemetry here.

- :mod:`.uapi`: flags, structs and ioctls of ``include/uapi/linux/user_events.h``;
- :mod:`.errors`: what each errno means for each operation;
- :mod:`.user_events`: enable words, registrations and writes (``user_events_data``);
- :mod:`.format`: ``format`` files and registration commands (one parser);
- :mod:`.tracefs`: the tracefs file system, instances, and why it cannot be used here;
- :mod:`.ring_buffer`: the ring buffer's sub-buffer pages.

The write side (``_export``) and the read side (``reader``) both sit on it.
"""

from opentelemetry_exporter_userevents.abi.errors import UserEventsError, UserEventsUnavailable
from opentelemetry_exporter_userevents.abi.format import (
    EventFormat,
    FormatField,
    command_fields,
    parse_format,
    split_multi_format_name,
)
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs, TracefsError
from opentelemetry_exporter_userevents.abi.uapi import (
    USER_EVENT_REG_MULTI_FORMAT,
    USER_EVENT_REG_PERSIST,
    USER_EVENTS_MULTI_SYSTEM,
    USER_EVENTS_SYSTEM,
    data_loc,
    rel_loc,
)
from opentelemetry_exporter_userevents.abi.user_events import (
    Registration,
    UserEventsData,
    enable_word,
)

__all__ = [
    "USER_EVENTS_MULTI_SYSTEM",
    "USER_EVENTS_SYSTEM",
    "USER_EVENT_REG_MULTI_FORMAT",
    "USER_EVENT_REG_PERSIST",
    "EventFormat",
    "FormatField",
    "Registration",
    "Tracefs",
    "TracefsError",
    "UserEventsData",
    "UserEventsError",
    "UserEventsUnavailable",
    "command_fields",
    "data_loc",
    "enable_word",
    "parse_format",
    "rel_loc",
    "split_multi_format_name",
]
