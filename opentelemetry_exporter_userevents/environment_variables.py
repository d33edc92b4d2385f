# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Environment variables of the user_events exporters.

Registered in the ``opentelemetry_environment_variables`` entry-point group, so
``opentelemetry-instrument`` offers each as a flag (``--exporter_user_events_prefix``).
A constructor argument wins over the variable, which wins over the default.
"""

OTEL_EXPORTER_USER_EVENTS_PREFIX = "OTEL_EXPORTER_USER_EVENTS_PREFIX"
"""Tracepoint name prefix (default ``otel``: ``otel_span``, ``otel_log_info``, ...); give
each service its own to keep their tracepoints apart."""

OTEL_EXPORTER_USER_EVENTS_MAX_RECORD_SIZE = "OTEL_EXPORTER_USER_EVENTS_MAX_RECORD_SIZE"
"""Largest record payload in bytes (default 4064, what ftrace keeps with 4 KiB sub-buffers;
at most 8184, perf's limit). Larger spans and logs are cut to fit, with markers."""

OTEL_EXPORTER_USER_EVENTS_RESOURCE_INTERVAL = "OTEL_EXPORTER_USER_EVENTS_RESOURCE_INTERVAL"
"""Milliseconds between repeats of the resource record while it is listened to
(default 10000)."""

OTEL_EXPORTER_USER_EVENTS_TRACEFS = "OTEL_EXPORTER_USER_EVENTS_TRACEFS"
"""tracefs mount point, when it is not found from /proc/mounts."""

OTEL_EXPORTER_USER_EVENTS_DATA = "OTEL_EXPORTER_USER_EVENTS_DATA"
"""Path of the ``user_events_data`` file, for a container that has only that file
bind-mounted from the host (no tracefs). Not needed when the file is mounted under the name
``user_events_data``: it is then found from /proc/mounts."""

OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT = "OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT"
"""``true`` (default): multi-format events (``user_events_multi/<name>.<id>``) on kernels
that have them (6.9+), the single-format layout elsewhere. ``false``: the single-format
layout (``user_events/<name>_<schema version>``) on every kernel, for perf, trace-cmd and
the otel-arrow receiver, which cannot read multi-format names."""

OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT = "OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT"
"""Milliseconds an exporter waits at start, when a machine-wide reader (``otel-userevents
record --prefix '*'``) listens, for that reader to listen to its tracepoints before its
first write (default 2000; 0: neither announce nor wait, as releases before announcements).
Without such a reader nothing is waited for."""

OTEL_EXPORTER_USER_EVENTS_FORMAT = "OTEL_EXPORTER_USER_EVENTS_FORMAT"
"""``default``: our own records, whose fields stock tools, kernel filters and hist triggers
read. ``eventheader``: spans and logs as Common Schema 4.0 EventHeader events, laid out as
opentelemetry-rust-contrib's user_events exporters write them (Geneva agents, otel-arrow,
perf-decode), on ``<prefix>_L<level>K<keyword>`` tracepoints, the prefix being the
provider name (docs/common-schema.md)."""

OTEL_EXPORTER_USER_EVENTS_EVENTHEADER_KEYWORD = "OTEL_EXPORTER_USER_EVENTS_EVENTHEADER_KEYWORD"
"""The keyword of the EventHeader tracepoints (default 1, as rust-contrib's exporters), in
decimal or ``0x`` hex."""
