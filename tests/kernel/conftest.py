# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Kernel tests: no process a test started (reader, app, trace-cmd, perf) outlives it, and
no file system a tool mounted either."""

from collections.abc import Iterator

import pytest

from tests.support.kernel_support import mount_points, unmount
from tests.support.reader_process import reap_processes  # noqa: F401 (an autouse fixture)

_TRACING = ("tracefs", "debugfs")


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
