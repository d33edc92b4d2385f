# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Register an app's tracepoint in a test exactly as the exporters do, on any kernel."""

from __future__ import annotations

from opentelemetry_exporter_userevents.abi import Registration, UserEventsData
from opentelemetry_exporter_userevents.record.schema import Schema
from opentelemetry_exporter_userevents.record.tracepoints import commands


def register_as_exporter(data: UserEventsData, base: str, schema: Schema) -> Registration:
    """Tracepoint ``base`` with ``schema``, as the exporters register it: multi-format
    (``user_events_multi/<base>.<id>``) where the kernel takes the flag, else the versioned
    single-format name (``user_events/<base>_<version>``). A listener attached to it hears
    the app's records on either kernel."""
    multi, single = commands(base, schema)
    return data.register(multi, single_format_command=single)
