# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The slow-start warning (_export/announce.py, ``SLOW_START_MS``): whole exporters on a fake
kernel, beside a fake machine-wide reader that listens to the announcement tracepoint and
enables a service's tracepoints a given time after it announces. Time is a fake clock, so
"fast" and "slow" are exact whatever the host's load."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from opentelemetry_exporter_userevents import UserEventsLogExporter, UserEventsSpanExporter
from opentelemetry_exporter_userevents._export import announce
from opentelemetry_exporter_userevents.abi import uapi
from tests.support.fake_kernel import FakeKernel
from tests.support.span_fixtures import make_spans

ANNOUNCE_NAME = "otel_userevents_announce"


class FakeReader:
    """A machine-wide reader that answers each announcement ``answer_s`` after it (fake time):
    until then the tracepoints registered since the last answer are not listened to."""

    def __init__(self, monkeypatch, answer_s: float) -> None:
        self.answer_s = answer_s
        self.now = 1000.0
        self.announced_at: float | None = None
        self.waiting: list[int] = []  # enable word addresses the reader has not enabled yet
        registered = uapi.register_ioctl  # the fake kernel's

        def register_ioctl(fd, command, flags, address, bit, *args, **kwargs):
            index = registered(fd, command, flags, address, bit, *args, **kwargs)
            text = command.decode() if isinstance(command, bytes) else command
            if text.startswith(ANNOUNCE_NAME):
                self.announced_at = self.now  # it writes its announcement just after this
            else:
                uapi.ffi.cast("uint32_t *", address)[0] = 0
                self.waiting.append(address)
            return index

        monkeypatch.setattr(uapi, "register_ioctl", register_ioctl)
        clock = SimpleNamespace(monotonic=lambda: self.now, sleep=self.sleep)
        monkeypatch.setattr(announce, "time", clock)
        monkeypatch.setattr(announce, "_gave_up_once", False)
        if hasattr(announce, "_SlowStart"):  # a new process's
            monkeypatch.setattr(announce, "_slow_start", announce._SlowStart())

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.announced_at is not None and self.now >= self.announced_at + self.answer_s:
            for address in self.waiting:
                uapi.ffi.cast("uint32_t *", address)[0] = 1
            self.waiting.clear()
            self.announced_at = None


def start_exporters(fake: FakeKernel) -> list:
    """What an app starts with: a span and a log exporter, and a second service's."""
    return [
        UserEventsSpanExporter(tracefs=fake.tracefs, prefix="checkout"),
        UserEventsLogExporter(tracefs=fake.tracefs, prefix="checkout"),
        UserEventsSpanExporter(tracefs=fake.tracefs, prefix="billing"),
    ]


def slow_start_warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "slowed this process's start" in r.getMessage()]


def test_a_reader_that_answers_fast_costs_no_warning(monkeypatch, tmp_path, caplog):
    fake = FakeKernel(monkeypatch, tmp_path)
    reader = FakeReader(monkeypatch, answer_s=0.005)  # a real machine's few ms
    with caplog.at_level(logging.WARNING):
        exporters = start_exporters(fake)
    assert all(e._writer.announcement.listened for e in exporters)
    assert all(not e._writer.announcement.gave_up for e in exporters)
    assert slow_start_warnings(caplog) == []
    assert reader.waiting == []
    fake.settle(*exporters)


@pytest.mark.parametrize("answer_s", [0.15, 0.4, 1.5], ids=["sum", "one", "near-timeout"])
def test_a_slow_reader_is_warned_about_once_for_all_the_processs_exporters(
    monkeypatch, tmp_path, caplog, answer_s
):
    """0.15 s: each exporter waits 0.3 s (the answer, then as long again), under the bound
    alone, over it from the second; 0.4 s: over it from the first. One warning either way,
    and the exporters still write."""
    fake = FakeKernel(monkeypatch, tmp_path)
    FakeReader(monkeypatch, answer_s=answer_s)
    with caplog.at_level(logging.WARNING):
        exporters = start_exporters(fake)
        exporters[0].export(make_spans())
    (warning,) = slow_start_warnings(caplog)
    assert warning.levelno == logging.WARNING
    assert warning.name == "opentelemetry_exporter_userevents._export.announce"
    text = warning.getMessage()
    assert f"more than {announce.SLOW_START_MS} ms" in text
    assert "OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT" in text and "CPU" in text
    assert all(not e._writer.announcement.gave_up for e in exporters)
    waits = [e._writer.announcement.waited for e in exporters]
    assert waits == pytest.approx([min(2 * answer_s, 2.0)] * 3, abs=0.02)
    fake.settle(*exporters)
    assert fake.records("checkout_span"), "the exporter writes after its wait"


def test_the_warning_needs_a_reader_that_answered(monkeypatch, tmp_path, caplog):
    """A reader that never answers is the timeout's warning, not this one."""
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT", "1000")
    fake = FakeKernel(monkeypatch, tmp_path)
    FakeReader(monkeypatch, answer_s=10.0)
    with caplog.at_level(logging.WARNING):
        exporters = start_exporters(fake)
    assert exporters[0]._writer.announcement.gave_up
    assert "within 1000 ms" in caplog.text
    assert slow_start_warnings(caplog) == []
    fake.settle(*exporters)
