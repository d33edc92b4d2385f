# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""EventHeader writers read live: a reader started first with ``--provider NAME`` holds the
provider's tracepoints, so a short job that writes at once and exits (as the Rust exporter
writes, single-format ``NAME_L4K1``) has its first span rebuilt; under ``--provider '*'``
a provider that appears later is found by a rescan and named in the summary as one whose
first records may have been missed. The host side is
tests/reader/live/test_eventheader_providers.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.reader_process import ROOT

pytestmark = pytest.mark.kernel


def _writer(provider: str, name: str, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.eventheader_writer", provider, name, *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip


def _span_names(output) -> list[str]:
    spans, _ = proc.requests(output)
    return [
        span["name"]
        for request in spans
        for resource in request["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def test_a_reader_started_first_gets_a_providers_first_span(prefix, tmp_path):
    provider = f"{prefix}Prov"
    reader, output = proc.reader(tmp_path, "--prefix", prefix, "--provider", provider)
    writer = _writer(provider, "first span")
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0 and out.strip() == "1", err  # listened to at registration
    assert wait_until(lambda: output.exists() and _span_names(output) == ["first span"], 30)
    summary = proc.stop(reader)
    assert "lost 0" in summary and "cart (1)" in summary
    assert "invalid" not in summary and "EventHeader providers may have lost" not in summary


def test_every_provider_is_found_and_a_late_one_named(prefix, tmp_path):
    provider = f"{prefix}Late"
    reader, output = proc.reader(tmp_path, "--prefix", prefix, "--provider", "*")
    writer = _writer(provider, "found by a rescan", "--wait-listened")
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0 and out.strip() == "1", err
    assert wait_until(lambda: output.exists() and "found by a rescan" in _span_names(output), 30)
    summary = proc.stop(reader)
    assert "EventHeader providers may have lost their first records" in summary
    assert f"{provider} (found " in summary
