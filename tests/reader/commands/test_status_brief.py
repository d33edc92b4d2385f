# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``status`` answers in a line per prefix (a service has some 25 tracepoints: the full
listing was 50 lines for one prefix); ``--verbose`` gives each tracepoint, as before."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.commands import status as status_command

INSTANCE = "otel-userevents.1.2.3.pidns4026531836"
NAMES = [f"otel_span.{i:x}" for i in range(20)] + [f"otel_log_info.{i:x}" for i in range(5)]


@pytest.fixture
def one_service(monkeypatch):
    """A prefix ``otel`` of 25 tracepoints, one of them gone, all listened to by a reader
    and the first one by perf too."""
    tracefs = SimpleNamespace(path="/sys/kernel/tracing", status=lambda: "", instances=list)
    monkeypatch.setattr(status_command, "tracefs_of", lambda args: tracefs)
    monkeypatch.setattr(status_command, "check_user_events", lambda tracefs: None)
    monkeypatch.setattr(status_command, "_reader_instances", lambda tracefs, out: None)
    monkeypatch.setattr(
        status_command,
        "our_tracepoints",
        lambda tracefs, decoder: [("user_events_multi", name, "span") for name in NAMES],
    )

    def describe(tracefs: object, system: str, name: str, decoder: object) -> str:
        if name == NAMES[-1]:
            return "multi-format, gone"
        return f"multi-format, schema 1 (this release's), id {NAMES.index(name)}, 14 fields"

    def listeners(tracefs, system, name, users, instances) -> list[str]:
        return [f"ftrace (instance {INSTANCE})"] + (["perf"] if name == NAMES[0] else [])

    monkeypatch.setattr(status_command, "_describe", describe)
    monkeypatch.setattr(status_command, "_listeners", listeners)


def test_status_says_a_line_per_prefix_by_default(one_service, capsys):
    assert cli.main(["status"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "tracefs: /sys/kernel/tracing",
        "prefix otel: 25 tracepoints, 24 multi-format, schema 1 (this release's); "
        f"1 multi-format, gone; listeners: ftrace (instance {INSTANCE}) on all, perf on 1 of 25",
    ]


@pytest.mark.parametrize("flag", ["--verbose", "-v"])
def test_status_verbose_lists_each_tracepoint_and_its_listeners(one_service, capsys, flag):
    assert cli.main(["status", flag]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 2 * len(NAMES)
    assert lines[1] == "prefix otel:"
    assert lines[2] == (
        "  user_events_multi/otel_span.0: span, multi-format, schema 1 (this release's), id 0, "
        "14 fields"
    )
    assert lines[3] == f"    listeners: ftrace (instance {INSTANCE}), perf"
