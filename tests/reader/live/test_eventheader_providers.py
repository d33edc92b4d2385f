# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record --provider``: a named EventHeader provider's ``_L1K1`` to ``_L5K1`` are held
from the reader's start, with exactly the fields every EventHeader writer registers, and
enabled; ``--provider '*'`` takes every EventHeader tracepoint a rescan finds and names
the providers found after the start; records read live are rebuilt as captured ones are.
On a directory laid out as tracefs and the stand-in for user_events_data; the kernel side
is tests/kernel/test_eventheader_live.py."""

from __future__ import annotations

import argparse
import io
import os
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.abi import uapi
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.reader.commands import status as status_command
from opentelemetry_exporter_userevents.reader.commands.common import discovery_parts
from opentelemetry_exporter_userevents.reader.decode.eventheader_records import (
    COMMAND_FIELDS,
    EVENTHEADER_KIND,
)
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.live.eventheader_providers import MAX_FOUND_LATER
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from tests.support.eventheader_captures import (
    eventheader_format,
    eventheader_record,
    rust_span,
)
from tests.support.fake_kernel import FakeKernel
from tests.support.pages import HEADER_PAGE, data_event, page


class DirectoryTracefs(Tracefs):
    """A directory laid out as tracefs; tracepoints are made with their ``id`` and
    ``format``, and what is enabled in an instance is noted."""

    def __init__(self, path: Path) -> None:
        (path / "instances").mkdir()
        (path / "events").mkdir()
        (path / "events" / "header_page").write_text(HEADER_PAGE)
        (path / "user_events_status").write_text("")
        if not (path / "user_events_data").exists():
            (path / "user_events_data").write_bytes(b"")
        super().__init__(str(path))
        self.enabled: list[str] = []
        self.next_id = 400

    def add(self, name: str, text: str | None = None) -> None:
        directory = Path(self.event_dir(USER_EVENTS_SYSTEM, name))
        if directory.exists():
            return
        directory.mkdir(parents=True)
        self.next_id += 1
        (directory / "id").write_text(f"{self.next_id}\n")
        (directory / "format").write_text(text or eventheader_format(name, self.next_id))

    def set_enabled(
        self, system: str, name: str, enabled: bool, instance: str | None = None
    ) -> None:
        assert instance is not None and os.path.isdir(self.instance_dir(instance))
        if enabled:
            self.enabled.append(name)


@pytest.fixture
def kernel(monkeypatch, tmp_path) -> tuple[FakeKernel, DirectoryTracefs, list[tuple[str, int]]]:
    """The stand-in for user_events_data whose EventHeader registrations make tracepoints,
    as the kernel's do; and each such registration's command and flags (the reader holds
    its prefix's tracepoints too: not listed)."""
    fake = FakeKernel(monkeypatch, tmp_path)
    tracefs = DirectoryTracefs(tmp_path)
    registered: list[tuple[str, int]] = []
    register = uapi.register_ioctl

    def register_ioctl(fd, command, flags, address, bit, *args, **kwargs):
        text = command.decode() if isinstance(command, bytes) else command
        if "eventheader_flags" in text:
            registered.append((text, flags))
            tracefs.add(text.split(" ", 1)[0])
        return register(fd, command, flags, address, bit, *args, **kwargs)

    monkeypatch.setattr(uapi, "register_ioctl", register_ioctl)
    return fake, tracefs, registered


def _reader(tracefs: DirectoryTracefs, providers: list[str], hold: bool = True) -> TraceReader:
    reader = TraceReader(tracefs, prefix="nosuch", providers=providers, hold=hold)
    reader.pipes.open = lambda: None  # type: ignore[method-assign] # no per-CPU pipes here
    return reader


def test_a_named_provider_is_held_from_the_start_with_the_writers_fields(kernel):
    _, tracefs, registered = kernel
    reader = _reader(tracefs, ["MyProvider"]).start()
    try:
        names = [f"MyProvider_L{level}K1" for level in range(1, 6)]
        assert registered == [(f"{name} {COMMAND_FIELDS}", 0) for name in names]  # single-format
        assert sorted(tracefs.enabled) == names  # enabled before any writer exists
        assert set(reader.tracepoints.values()) == {EVENTHEADER_KIND}
        tracefs.add("MyProvider_L4K2")  # another keyword: found by the next rescan
        tracefs.add("Other_L4K1")  # another provider: not read
        assert reader.scan() == ["MyProvider_L4K2"]
        assert reader.late_providers() == []  # named: never late
    finally:
        reader.close()


def test_every_provider_is_found_by_rescans_and_late_ones_are_named(kernel):
    _, tracefs, registered = kernel
    tracefs.add("Early_L4K1")
    tracefs.add("Fake_L4K1", eventheader_format("Fake_L4K1", 499).replace("eventheader_", "x"))
    reader = _reader(tracefs, ["*"]).start()
    try:
        assert registered == []  # '*' names no provider to hold
        assert tracefs.enabled == ["Early_L4K1"]
        assert "Fake_L4K1" in reader.incompatible  # an EventHeader name, not its format
        tracefs.add("Late_L2K1")
        tracefs.add("Late_L4K1")
        assert sorted(reader.scan()) == ["Late_L2K1", "Late_L4K1"]
        assert [late.provider for late in reader.late_providers()] == ["Late"]
        (part,) = [p for p in discovery_parts(reader) if "EventHeader providers" in p]
        assert part.startswith("1 EventHeader providers may have lost their first records")
        assert "Late (found " in part and "Early" not in part
    finally:
        reader.close()


def test_late_providers_are_remembered_up_to_a_bound(kernel):
    _, tracefs, _ = kernel
    reader = _reader(tracefs, ["*"], hold=False)
    reader.scan()
    reader.providers.note([f"P{n}_L4K1" for n in range(MAX_FOUND_LATER + 5)], 1.0)
    assert len(reader.late_providers()) == MAX_FOUND_LATER
    assert reader.providers.not_remembered == 5
    assert "1029 EventHeader providers" in " ".join(discovery_parts(reader))


def test_without_provider_no_eventheader_tracepoint_is_touched(kernel):
    _, tracefs, registered = kernel
    tracefs.add("MyProvider_L4K1")
    reader = _reader(tracefs, []).start()
    try:
        assert registered == []
        assert tracefs.enabled == [] and reader.late_providers() == []
    finally:
        reader.close()


def test_live_pages_of_an_eventheader_tracepoint_rebuild_its_span(kernel):
    _, tracefs, _ = kernel
    reader = _reader(tracefs, ["MyProvider"]).start()
    try:
        event_id = int(Path(tracefs.event_dir(USER_EVENTS_SYSTEM, "MyProvider_L4K1"), "id")
                       .read_text())  # fmt: skip
        raw = eventheader_record(event_id, "Span", rust_span())
        records: list = []
        reader.decoder.decode_page(page(1000, [data_event(0, raw)]), records)
        assert [r.kind for r in records] == [EVENTHEADER_KIND]
        join_stage = JoinStage()
        (joined,) = join_stage.add(records)
        assert joined.is_span and joined.checked.name == "GET /users"
        assert joined.resource.attributes["service.name"] == "cart"
    finally:
        reader.close()


def test_status_lists_eventheader_tracepoints_by_provider(kernel, monkeypatch):
    _, tracefs, _ = kernel
    tracefs.add("MyProvider_L4K1")
    tracefs.add("MyProvider_L5K1")
    monkeypatch.setattr(status_command, "tracefs_of", lambda args: tracefs)
    out = io.StringIO()
    args = argparse.Namespace(tracefs=None, prefix=None, prefixes=None, spool=None)
    assert status_command.status(args, out) == 0  # brief: a line a provider
    assert "EventHeader provider MyProvider: 2 tracepoints, single-format, EventHeader" in (
        out.getvalue()
    )
    out = io.StringIO()
    args.verbose = True
    assert status_command.status(args, out) == 0
    text = out.getvalue()
    assert "EventHeader provider MyProvider:" in text
    assert "user_events/MyProvider_L4K1: eventheader, single-format, EventHeader" in text
    assert "no tracepoints of ours" not in text
