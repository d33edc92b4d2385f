# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A container's way in: only ``user_events_data`` bind-mounted from the host, found from
``/proc/mounts`` or named by OTEL_EXPORTER_USER_EVENTS_DATA (the kernel test
test_containers.py proves it on a real bind mount)."""

import errno
import logging

import pytest

from opentelemetry_exporter_userevents import UserEventsSampler, UserEventsSpanExporter
from opentelemetry_exporter_userevents._export import writer
from opentelemetry_exporter_userevents._export.config import ExporterConfig
from opentelemetry_exporter_userevents.abi import tracefs as tracefs_module
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs, find_data_file
from opentelemetry_exporter_userevents.abi.user_events import UserEventsData


@pytest.fixture(autouse=True)
def fresh_warning(monkeypatch):
    monkeypatch.setattr(writer, "_warned_unavailable", False)


def _mounts(tmp_path, *lines):
    path = tmp_path / "mounts"
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def _escaped(path) -> str:
    return str(path).replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011")


def test_a_tracefs_file_mounted_as_user_events_data_is_found(tmp_path):
    ctr = tmp_path / "ctr dir\tx"
    ctr.mkdir()
    data = ctr / "user_events_data"
    data.write_text("")
    mounts = _mounts(
        tmp_path,
        "proc /proc proc rw 0 0",
        f"nodev {_escaped(data)} tracefs rw,relatime 0 0",
    )

    assert find_data_file(mounts) == str(data)


@pytest.mark.parametrize(
    ("name", "kind", "is_file"),
    [
        ("trace_marker", "tracefs", True),  # another tracefs file: not ours to register on
        ("user_events_data", "tmpfs", True),  # a file of that name that is not tracefs's
        ("user_events_data", "tracefs", False),  # a directory of that name
    ],
)
def test_only_a_tracefs_file_named_user_events_data_is_taken(tmp_path, name, kind, is_file):
    point = tmp_path / name
    if is_file:
        point.write_text("")
    else:
        point.mkdir()

    assert find_data_file(_mounts(tmp_path, f"nodev {point} {kind} rw 0 0")) is None


def test_without_tracefs_the_bind_mounted_file_is_opened(tmp_path, monkeypatch):
    data = tmp_path / "user_events_data"
    data.write_text("")
    monkeypatch.setattr(Tracefs, "find", classmethod(lambda cls, mounts="": None))
    monkeypatch.setattr(tracefs_module, "find_data_file", lambda mounts="": str(data))

    opened = UserEventsData()
    try:
        assert opened.available, opened.reason
        assert opened.tracefs is None, "only the data file is here"
    finally:
        opened.close()


def test_the_setting_wins_over_tracefs(tmp_path):
    elsewhere = tmp_path / "bound-here"
    elsewhere.write_text("")
    no_data_tracefs = tmp_path / "tracefs"
    no_data_tracefs.mkdir()

    opened = UserEventsData(no_data_tracefs, data_path=elsewhere)
    try:
        assert opened.available, opened.reason
    finally:
        opened.close()


def test_a_missing_data_file_names_the_setting(tmp_path):
    opened = UserEventsData(data_path=tmp_path / "nowhere")

    assert not opened.available
    assert str(tmp_path / "nowhere") in opened.reason
    assert "OTEL_EXPORTER_USER_EVENTS_DATA" in opened.reason


def test_a_data_file_without_rights_names_its_directory(tmp_path, monkeypatch):
    def denied(path, flags):
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(tracefs_module.os, "open", denied)

    opened = UserEventsData(data_path=tmp_path / "run" / "user_events_data")

    assert not opened.available
    assert "no permission" in opened.reason and str(tmp_path / "run") in opened.reason


def test_keyword_then_variable(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_DATA", "/run/ue/user_events_data")

    assert ExporterConfig.from_arguments().user_events_data == "/run/ue/user_events_data"
    assert ExporterConfig.from_arguments(user_events_data="/x").user_events_data == "/x"
    monkeypatch.delenv("OTEL_EXPORTER_USER_EVENTS_DATA")
    assert ExporterConfig.from_arguments().user_events_data is None


def test_exporter_and_sampler_take_the_setting(tmp_path, caplog):
    """A file that is not user_events_data is opened but refuses registration (ENOTTY):
    each tracepoint is then warned about and dropped, never raised."""
    caplog.set_level(logging.WARNING, "opentelemetry_exporter_userevents")
    not_ours = tmp_path / "plain-file"
    not_ours.write_text("")

    exporter = UserEventsSpanExporter(user_events_data=str(not_ours))
    sampler = UserEventsSampler(user_events_data=str(not_ours))

    assert exporter._writer.available and exporter.registration is None
    assert sampler.registration is None and not sampler.enabled
    assert any("cannot register" in r.getMessage() for r in caplog.records)
    exporter.shutdown()
