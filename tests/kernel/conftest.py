# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Kernel tests: no process a test started (reader, app, trace-cmd, perf) outlives it."""

from tests.support.reader_process import reap_processes  # noqa: F401 (an autouse fixture)
