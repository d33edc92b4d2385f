# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's own registrations: our tracepoints exist, and are enabled, before any app.

An app's tracepoints do not exist until it registers them, so a reader that only enables
what it finds misses everything an app writes before the next rescan (a short job, or a
service's start-up). The kernel gives one tracepoint per name and format (multi-format) or
per name (single-format), and sets the enable bit of an app that registers an enabled
tracepoint at registration (tests/kernel/test_enable.py,
``test_registration_sees_a_listener_attached_before_it``). So the reader registers our
schemas itself, in both layouts the exporters may use, and enables them; an app's first
record then already has a listener.

These registrations never write. They belong to the reader's ``user_events_data`` file:
closing it (at exit, or when the kernel closes it after SIGKILL) unregisters them, and the
kernel deletes each tracepoint once no process holds it.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry_exporter_userevents.abi.errors import UserEventsError
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM
from opentelemetry_exporter_userevents.abi.user_events import UserEventsData
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import (
    held_names,
    register_command,
)
from opentelemetry_exporter_userevents.reader.decode.otlp_metrics import COMMAND as OTLP_METRICS
from opentelemetry_exporter_userevents.record.tracepoints import (
    announce_commands,
    commands,
    tracepoint_kinds,
)


class TracepointHolder:
    """Registers every tracepoint of some prefixes, both layouts, and holds them."""

    def __init__(self, tracefs: Tracefs) -> None:
        self._data = UserEventsData(tracefs.path)
        self.errors: dict[str, str] = {}
        """Commands the kernel refused (for example a single-format name that another
        program holds with other fields), and why: those tracepoints are found by rescans."""
        self.held = 0

    @property
    def reason(self) -> str | None:
        """Why nothing can be held (user_events_data cannot be opened), or None."""
        return self._data.reason if not self._data.available else None

    def hold(self, prefixes: Iterable[str]) -> None:
        """Register the tracepoints of ``prefixes``: multi-format where the kernel has it,
        and the versioned single-format name always (an app may ask for that layout)."""
        if not self._data.available:
            return
        for prefix in prefixes:
            for base, (_, schema) in tracepoint_kinds(prefix).items():
                self._hold(*commands(base, schema))

    def hold_providers(self, providers: Iterable[str]) -> None:
        """Register ``NAME_L1K1`` to ``NAME_L5K1`` of each EventHeader provider, with the
        fields every EventHeader writer registers (single-format: one tracepoint per name,
        so the writer's registration finds the reader's and shares it)."""
        if not self._data.available:
            return
        for provider in providers:
            for name in held_names(provider):
                command = register_command(name)
                try:
                    self._data.register(command, 0)
                    self.held += 1
                except UserEventsError as error:
                    self.errors[error.command] = str(error)

    def hold_otlp_metrics(self) -> None:
        """Register the metric exporters' ``otlp_metrics`` tracepoint with their fields
        (single-format, so a writer's registration shares the reader's)."""
        if not self._data.available:
            return
        try:
            self._data.register(OTLP_METRICS, 0)
            self.held += 1
        except UserEventsError as error:
            self.errors[error.command] = str(error)

    def hold_announcements(self) -> None:
        """Register the announcement tracepoint (:mod:`.announcements`), both layouts."""
        if self._data.available:
            self._hold(*announce_commands())

    def _hold(self, multi: str, single: str) -> None:
        try:
            registration = self._data.register(multi, single_format_command=single)
            self.held += 1
            if registration.system == USER_EVENTS_MULTI_SYSTEM:
                self._data.register(single, 0)
                self.held += 1
        except UserEventsError as error:
            self.errors[error.command] = str(error)

    def close(self) -> None:
        """Unregister everything (idempotent)."""
        self._data.close()
