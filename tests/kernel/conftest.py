# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Kernel tests: no process a test started (reader, app, trace-cmd, perf) outlives it, and
no file system a tool mounted either; the real collector (rotel) and its sink, for the tests
that deliver through it (``test_reader_collector.py``, ``test_reader_delivery.py``)."""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.pytest_plugin import GUEST_ENV
from tests.support import linuxtracepoints
from tests.support.collector import Rotel, Sink, running_rotel
from tests.support.kernel_support import mount_points, unmount
from tests.support.loopback import bring_loopback_up
from tests.support.reader_process import reap_processes  # noqa: F401 (an autouse fixture)

_TRACING = ("tracefs", "debugfs")


@pytest.fixture
def sink() -> Iterator[Sink]:
    """What the collector exports, as it receives it (on the guest's loopback)."""
    bring_loopback_up()
    server = Sink()
    yield server
    server.close()


@pytest.fixture
def collector(sink: Sink, tmp_path: Path) -> Iterator[Rotel]:
    """rotel, the tests' real collector, exporting to ``sink``."""
    with running_rotel(sink, tmp_path / "rotel.log") as rotel:
        yield rotel


@pytest.fixture(autouse=True)
def no_mount_outlives_its_test() -> Iterator[None]:
    """Tools mount debugfs (and with it tracefs at /sys/kernel/debug/tracing) when they run;
    a later test that unmounts or restricts /sys/kernel/tracing must find no other tracefs."""
    before = mount_points()
    yield
    added = [point for point, kind in mount_points() - before if kind in _TRACING]
    for point in sorted(added, key=len, reverse=True):  # inner mounts first
        try:
            unmount(point)
        except OSError:
            pass  # went with its parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The C++ test writers are compiled on the host, before a guest (which sees the
    host's files read-only) runs the tests that start them."""
    if os.environ.get(GUEST_ENV) == "1":
        return
    if any(item.path.name == "test_peer_writers.py" for item in items):
        try:
            linuxtracepoints.compile_writers()
        except (OSError, RuntimeError, subprocess.SubprocessError):
            pass  # the tests that start a writer fail with the reason
