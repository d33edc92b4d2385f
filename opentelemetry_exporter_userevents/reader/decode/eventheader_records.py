# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader as the reader's second record format: which tracepoints are EventHeader
ones, which providers a reader takes, and what a decoded record of one carries.

The Rust, C++ and .NET exporters write EventHeader events (docs/eventheader.md) on
``user_events:<provider>_L<level>K<keyword>`` tracepoints whose format's first field is
``eventheader_flags``. The decoder stage only recognises such a record and keeps its bytes
from the event header on (:class:`EventHeaderUnpacker`): decoding the event and mapping it
(:mod:`.common_schema`) happen at the validation boundary (:mod:`.eventheader_check`), so a
bad record is counted there by reason and writer pid, like one of ours, and with
``--workers`` in the worker that decoded its page.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry_exporter_userevents.abi.format import EventFormat
from opentelemetry_exporter_userevents.reader.decode.eventheader import eventheader_offset
from opentelemetry_exporter_userevents.reader.decode.eventheader_name import (
    parse_tracepoint_name,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import EventHeaderError
from opentelemetry_exporter_userevents.reader.decode.otlp_metrics import OTLP_METRICS

EVENTHEADER_KIND = "eventheader"
"""The kind of a decoded EventHeader record (:attr:`.TraceRecord.kind`); mapped at the
boundary to a span or a log."""
EVENT = "event"
"""The one value of such a record: its bytes from the event header on."""
MAX_PROVIDER = 200
"""The longest provider given by name (a tracepoint name is shorter than 256 bytes)."""
ANY_PROVIDER = "*"
"""Every EventHeader provider (``--provider '*'``)."""
HELD_LEVELS = range(1, 6)
"""``--provider NAME`` holds ``NAME_L1K1`` to ``NAME_L5K1``: the levels every writer uses
(critical to verbose) with keyword 1, the one all OpenTelemetry exporters write."""
COMMAND_FIELDS = "u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level"
"""The fields every EventHeader writer registers (eventheader.h,
``EVENTHEADER_COMMAND_TYPES``): a single-format tracepoint is one per name, so a reader
that holds one must register exactly these."""


def provider_of(name: str) -> str | None:
    """The provider of an EventHeader tracepoint name (without its system), else None."""
    try:
        return parse_tracepoint_name(name).provider
    except EventHeaderError:
        return None


def is_provider(name: str) -> bool:
    """Whether ``name`` can be given as a provider (``--provider``): letters, digits and
    ``_`` (what the writers' providers are made of: a tracepoint name takes no space, ``:``
    or ``;``), at most 200 characters, whose tracepoints parse back to it."""
    return (
        0 < len(name) <= MAX_PROVIDER
        and name.isascii()
        and name.replace("_", "a").isalnum()
        and provider_of(f"{name}_L1K1") == name
    )


def held_names(provider: str) -> list[str]:
    """The tracepoints ``--provider NAME`` holds from the reader's start."""
    return [f"{provider}_L{level}K1" for level in HELD_LEVELS]


def register_command(name: str) -> str:
    """The user_events command that registers EventHeader tracepoint ``name``."""
    return f"{name} {COMMAND_FIELDS}"


class Providers:
    """The EventHeader providers a reader takes: named ones, ``*`` for all, none by
    default (``record`` without ``--provider``). ``otlp_metrics`` names the metric
    exporters' tracepoint of that name (:mod:`.otlp_metrics`), which ``*`` takes too."""

    def __init__(self, providers: Iterable[str] = ()) -> None:
        self.names = tuple(dict.fromkeys(providers))
        self.every = ANY_PROVIDER in self.names
        self.metrics = self.every or OTLP_METRICS in self.names
        """Whether the ``otlp_metrics`` tracepoint is taken (and held from the start)."""
        self._named = frozenset(self.names) - {ANY_PROVIDER, OTLP_METRICS}

    @property
    def named(self) -> list[str]:
        """The EventHeader providers given by name (held from the start)."""
        return [name for name in self.names if name in self._named]

    def takes(self, name: str) -> bool:
        """Whether tracepoint ``name`` is an EventHeader one of a provider taken."""
        provider = provider_of(name)
        return provider is not None and (self.every or provider in self._named)

    def __bool__(self) -> bool:
        return bool(self.names)


class EventHeaderUnpacker:
    """The decoder stage's part: a record's bytes from the event header on, as the one
    value of its :class:`.TraceRecord` (the rest is the boundary's)."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def unpack(self, record: bytes | bytearray | memoryview) -> dict[str, Any]:
        if len(record) < self.offset:
            raise ValueError("a record shorter than its common fields")
        return {EVENT: bytes(record[self.offset :])}


def eventheader_unpacker(fmt: EventFormat) -> EventHeaderUnpacker | None:
    """An unpacker for ``fmt`` if it is an EventHeader tracepoint's (its name follows the
    naming rules and its first field is ``eventheader_flags``), else None."""
    offset = eventheader_offset(fmt)
    if offset is None or provider_of(fmt.name) is None:
        return None
    return EventHeaderUnpacker(offset)
