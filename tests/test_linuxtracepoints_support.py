# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""tests/support/linuxtracepoints.py: without a LinuxTracepoints build, a test that needs
one fails (a CI run must not pass without it) and says what to run; the writers are
compiled into the build, never into the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import linuxtracepoints


def test_a_missing_build_fails_the_test_naming_what_to_run(monkeypatch, tmp_path):
    monkeypatch.setenv(linuxtracepoints.BUILD_ENV, str(tmp_path / "nothing"))
    with pytest.raises(pytest.fail.Exception) as failed:
        linuxtracepoints.require()
    message = str(failed.value)
    assert f"{tmp_path / 'nothing'}/bin/perf-decode" in message
    assert "cmake -S ../shared/peers/LinuxTracepoints -B build/linuxtracepoints" in message
    assert "make -C build/linuxtracepoints -j2" in message
    assert linuxtracepoints.BUILD_ENV in message
    with pytest.raises(pytest.fail.Exception):
        linuxtracepoints.writer("rust_span_writer")
    linuxtracepoints.compile_writers()  # nothing to compile against: nothing done
    assert not (tmp_path / "nothing").exists()


def test_every_writer_is_found_and_cached_under_the_build(monkeypatch, tmp_path):
    monkeypatch.setenv(linuxtracepoints.BUILD_ENV, str(tmp_path))
    assert linuxtracepoints.names() == [
        "dotnet_log_writer", "otlp_metrics_writer", "rust_span_writer"
    ]  # fmt: skip
    cached = linuxtracepoints._cached("rust_span_writer")
    assert cached.parent == tmp_path / linuxtracepoints.CACHE
    assert Path(linuxtracepoints.ROOT) not in cached.parents
