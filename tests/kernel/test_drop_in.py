# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Drop-in without surprises, on the kernel: nothing raises into the application from any
entry point whatever it is handed, listened by a real tracer and detached; and exports
racing shutdown never write to a descriptor the exporter gave back."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents import UserEventsSpanExporter
from tests.conftest import Listener
from tests.test_never_raises import counted_once, drive, resource_writes
from tests.test_shutdown_race import race, untouched

pytestmark = pytest.mark.kernel

_instances = itertools.count()


@pytest.mark.parametrize("listened", [True, False], ids=["listened", "detached"])
@settings(
    max_examples=15,
    deadline=None,
    database=None,  # the guest's file system is read-only
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_nothing_raises_into_the_application_on_the_kernel(tracefs, prefix, listened, data):
    listener = Listener(tracefs, f"{prefix}_{os.getpid()}_{next(_instances)}")
    try:
        drive(tracefs.path, listened, data, prefix=prefix, listen=listener)
    finally:
        listener.close()


def test_threads_export_while_shutdown_runs_and_the_app_reopens_the_number(
    tracefs, prefix, attach, tmp_path
):
    exporter = UserEventsSpanExporter(prefix=prefix)
    exporter.resource_writes = resource_writes(exporter)  # type: ignore[attr-defined]
    attach(exporter.registration)
    attach(exporter._writer.registrations["resource"])
    number = exporter._writer._data.fd
    files, stats, handed = race(exporter, tmp_path)
    try:
        assert number in files, "the application's file took the exporter's number"
        assert untouched(files)
    finally:
        for fd in files:
            os.close(fd)
    counted_once(exporter, handed)
    assert stats["dropped_shutdown"] > 0 and stats["written"] > 1, "a race, both sides"
    assert attach.recorded() == stats["written"], "every record counted written was kept"
