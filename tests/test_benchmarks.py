# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A smoke test of the benchmark script (python -m benchmarks): every host configuration
produces numbers, and the report computes the targets from them. No timing is asserted."""

import pytest

from benchmarks import report
from benchmarks.configs import HOST_KEYS, SETUPS, keys_for
from benchmarks.measure import measure, summary


@pytest.mark.parametrize("signal", ["spans", "logs"])
def test_every_host_configuration_produces_numbers(signal):
    keys = keys_for(signal, HOST_KEYS)

    samples = measure(SETUPS[signal], keys, n=3, rounds=2)
    figures = summary(samples)

    assert set(samples) == set(keys) and all(len(v) == 2 for v in samples.values())
    assert all(0 < f["best"] <= f["median"] for f in figures.values())
    assert ("g" in keys) == (signal == "spans")


def test_listening_needs_user_events(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_TRACEFS", str(tmp_path))

    with pytest.raises(RuntimeError, match="test bed"):
        SETUPS["spans"]("d")


def run(**best):
    return {
        "machine": "m",
        "n": 1,
        "rounds": 1,
        "spans": {k: {"best": v, "median": v} for k, v in best.items()},
        "logs": {k: {"best": v, "median": v} for k, v in best.items() if k != "g"},
    }


def test_report_computes_the_targets_as_ratios():
    results = {
        "host": run(a=10, b=100, c=101.5, e=400, f=500, g=12),
        "guest": run(a=10, b=100, c=110, d=170, e=400, f=500, g=16),
    }

    found = {(t.name.split()[0], t.signal, t.where): t for t in report.targets(results)}
    text = report.text(results)

    assert found["Disabled", "spans", "host"].value == pytest.approx(0.015)
    assert found["Disabled", "spans", "host"].met
    assert ("Disabled", "spans", "guest") not in found, "the guest is too noisy for 2%"
    assert found["Encode", "spans", "guest"].value == pytest.approx(70 / 300)
    assert not found["Encode", "spans", "guest"].met
    assert found["Traced", "spans", "host"].met
    assert found["Traced", "spans", "host"].value == pytest.approx(1.2)
    assert "SDK + user_events, ftrace listening" in text and "MISSED" in text
    assert "1.015" in text  # c as a multiple of b, host column


def test_report_without_a_guest_run_says_so():
    text = report.text({"host": run(a=10, b=100, c=101, e=400, f=500, g=14)})

    assert "not measured (no guest run)" in text
