# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record --provider '*'`` (or ``--provider otlp_metrics``) holds the metric exporters'
``otlp_metrics`` tracepoint from the reader's start, with exactly the producers' fields,
and enables it before any writer exists; its live records are rebuilt as captured ones
are. On a directory laid out as tracefs and the stand-in for user_events_data; the kernel
side is tests/kernel/test_eventheader_live.py."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.abi import uapi
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.reader.commands import status as status_command
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from tests.reader.live.test_eventheader_providers import DirectoryTracefs, _reader
from tests.support.fake_kernel import FakeKernel
from tests.support.otlp_metrics_captures import (
    otlp_metrics_format,
    otlp_metrics_record,
    sample_requests,
)
from tests.support.pages import data_event, page

PRODUCERS = "otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer"
"""The producers' registration (written here, not taken from the reader)."""


@pytest.fixture
def kernel(monkeypatch, tmp_path) -> tuple[DirectoryTracefs, list[tuple[str, int]]]:
    """The stand-in whose ``otlp_metrics`` registrations make the tracepoint, as the
    kernel's do; and each such registration's command and flags."""
    FakeKernel(monkeypatch, tmp_path)
    tracefs = DirectoryTracefs(tmp_path)
    registered: list[tuple[str, int]] = []
    register = uapi.register_ioctl

    def register_ioctl(fd, command, flags, address, bit, *args, **kwargs):
        text = command.decode() if isinstance(command, bytes) else command
        if text.startswith("otlp_metrics"):
            registered.append((text.rstrip("\0"), flags))
            tracefs.add("otlp_metrics", otlp_metrics_format(tracefs.next_id + 1))
        return register(fd, command, flags, address, bit, *args, **kwargs)

    monkeypatch.setattr(uapi, "register_ioctl", register_ioctl)
    return tracefs, registered


@pytest.mark.parametrize("providers", [["*"], ["otlp_metrics"], ["MyProvider", "otlp_metrics"]])
def test_the_tracepoint_is_held_from_the_start_with_the_producers_fields(kernel, providers):
    tracefs, registered = kernel
    reader = _reader(tracefs, providers).start()
    try:
        assert registered == [(PRODUCERS, 0)]  # single-format: shared with every writer
        assert "otlp_metrics" in tracefs.enabled  # before any writer exists
        assert reader.tracepoints["user_events/otlp_metrics"] == "otlp_metrics"
        assert reader.late_providers() == []  # held: never late, and no EventHeader provider
    finally:
        reader.close()


def test_without_it_among_the_providers_it_is_not_touched(kernel):
    tracefs, registered = kernel
    tracefs.add("otlp_metrics", otlp_metrics_format(450))
    reader = _reader(tracefs, ["MyProvider"]).start()
    try:
        assert registered == [] and "otlp_metrics" not in tracefs.enabled
    finally:
        reader.close()


def test_live_pages_of_it_rebuild_the_requests_points(kernel):
    tracefs, _ = kernel
    reader = _reader(tracefs, ["*"]).start()
    try:
        event_id = int(Path(tracefs.event_dir(USER_EVENTS_SYSTEM, "otlp_metrics"), "id")
                       .read_text())  # fmt: skip
        raws = [otlp_metrics_record(event_id, buffer) for buffer in sample_requests()]
        records: list = []
        reader.decoder.decode_page(page(1000, [data_event(0, raw) for raw in raws]), records)
        assert [r.kind for r in records] == ["otlp_metrics"] * 4
        points = JoinStage().add(records)
        assert [p.name for p in points] == ["items.sold", "stock.level", "pick.duration",
                                            "queue.wait"]  # fmt: skip
        assert {p.resource.attributes["service.name"] for p in points} == {"inventory"}
    finally:
        reader.close()


def test_status_lists_the_tracepoint(kernel, monkeypatch):
    tracefs, _ = kernel
    tracefs.add("otlp_metrics", otlp_metrics_format(451))
    monkeypatch.setattr(status_command, "tracefs_of", lambda args: tracefs)
    out = io.StringIO()
    args = argparse.Namespace(tracefs=None, prefix=None, prefixes=None, spool=None)
    assert status_command.status(args, out) == 0  # brief: a line for the tracepoint
    assert "OTLP metrics (otlp_metrics): 1 tracepoint, single-format, OTLP protobuf" in (
        out.getvalue()
    )
    out = io.StringIO()
    args.verbose = True
    assert status_command.status(args, out) == 0
    text = out.getvalue()
    assert "OTLP metrics (otlp_metrics):" in text
    assert "user_events/otlp_metrics: otlp_metrics, single-format, OTLP protobuf" in text
    assert "no tracepoints of ours" not in text
