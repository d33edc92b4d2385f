# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A smoke test of benchmarks/reader_ready_cpu.py: each case runs the entry point to where
it stops on this host (no user_events: an empty tracefs), and the report names every case.
No timing is asserted."""

from __future__ import annotations

from benchmarks import reader_ready_cpu


def test_each_case_is_measured_and_reported(monkeypatch):
    cases = {"record": ["record"], "--help": ["--help"]}
    monkeypatch.setattr(reader_ready_cpu, "CASES", cases)
    results = reader_ready_cpu.measure(rounds=1, in_guest=False)
    assert set(results) == set(cases) and all(seconds > 0 for seconds in results.values())
    text = reader_ready_cpu.report(results, "host")
    assert all(case in text for case in cases) and "CPU-s" in text
