# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A smoke test of the benchmark script (python -m benchmarks): every host configuration
produces numbers, and the report computes the targets from them. No timing is asserted."""

import pytest

from benchmarks import reader_live, report
from benchmarks.configs import HOST_KEYS, SETUPS, keys_for
from benchmarks.measure import measure, summary
from tests.support.fake_kernel import FakeKernel


@pytest.mark.parametrize("signal", ["spans", "logs", "logging"])
def test_every_host_configuration_produces_numbers(signal):
    keys = keys_for(signal, HOST_KEYS)

    samples = measure(SETUPS[signal], keys, n=3, rounds=2)
    figures = summary(samples)

    assert set(samples) == set(keys) and all(len(v) == 2 for v in samples.values())
    assert all(0 < f["best"] <= f["median"] for f in figures.values())
    assert ("g" in keys) == (signal == "spans")
    assert ("h" in keys) == (signal == "logging")


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
        "logging": {k: {"best": v, "median": v} for k, v in best.items() if k in "bhd"},
    }


def test_report_computes_the_targets_as_ratios():
    results = {
        "host": run(a=10, b=100, c=101.5, c_floor=101.2, e=400, f=500, g=12, h=105),
        "guests": {
            "bzImage": run(a=10, b=100, c=110, d=170, d_floor=130, e=400, f=500, g=16, h=120),
            "bzImage-no-multi-format": run(a=10, b=100, c=110, d=150, e=400, f=500, g=16),
        },
    }

    found = {(t.name.split()[0], t.signal, t.where): t for t in report.targets(results)}
    text = report.text(results)

    assert found["Disabled", "spans", "host"].value == pytest.approx(0.003)
    assert found["Disabled", "spans", "host"].met
    assert found["Disabled", "spans", "host"].floor == pytest.approx(0.012)
    assert ("Disabled", "spans", "bzImage") not in found, "the guest is too noisy for 0.5%"
    assert found["Encode", "spans", "bzImage"].value == pytest.approx(70 / 300)
    assert found["Encode", "spans", "bzImage"].floor == pytest.approx(30 / 300)
    assert found["Encode", "spans", "bzImage-no-multi-format"].floor is None
    assert not found["Encode", "spans", "bzImage"].met
    assert found["Encode", "spans", "bzImage-no-multi-format"].met
    assert found["Traced", "spans", "host"].met
    assert found["Traced", "spans", "host"].value == pytest.approx(1.2)
    assert found["logging", "logging", "host"].value == pytest.approx(1.05)
    assert found["logging", "logging", "host"].met
    assert "SDK + user_events, ftrace listening" in text and "MISSED" in text
    assert "1.015" in text  # c as a multiple of b, host column
    assert "the least possible: 10.0%" in text  # d_floor, the encoding share without encoding
    assert "bzImage-no-multi-format, × b" in text  # a column per kernel image
    assert "UserEventsLoggingHandler, ftrace listening" in text


def test_report_of_an_older_results_file_with_one_guest():
    results = {"host": run(b=100, e=400), "guest": run(b=100, d=150, e=400)}

    found = {(t.name.split()[0], t.signal, t.where): t for t in report.targets(results)}

    assert found["Encode", "spans", "guest"].value == pytest.approx(50 / 300)


def test_report_without_a_guest_run_says_so():
    text = report.text({"host": run(a=10, b=100, c=101, e=400, f=500, g=14)})

    assert "OTLP encoding (spans, guest): not measured (no guest run)" in text


def test_reader_live_report_names_the_highest_rate_held_with_nothing_lost():
    def step(asked, rate, lost, writers=1):
        return {"asked": asked, "rate": rate, "spans": 10, "written": 11, "read": 11 - lost,
                "lost": lost, "rebuilt": 10 - lost, "writers": writers}  # fmt: skip

    result = {
        "own": step(0, 900.0, 0),
        "steps": [step(225, 224.0, 0), step(450, 448.0, 0), step(0, 1000.0, 0),
                  step(0, 1200.0, 0, writers=2), step(0, 1500.0, 40, writers=4)],
    }  # fmt: skip

    text = reader_live.report(result, "m")

    assert "one writer's own rate (unpaced, a reader recording): 1,000 spans/s" in text
    assert "2 x unpaced" in text and "4 x unpaced" in text
    assert text.splitlines()[-1] == (
        "highest writer rate held with 0 lost: 1,200 spans/s, 1.20x one writer's own rate"
    )


def test_report_sets_eventheader_beside_the_default_format():
    results = {
        "host": run(b=100, c=101, c_eh=102, e=400),
        "guests": {"bzImage": run(b=100, c=101, c_eh=99.99, d=200, d_eh=250, e=400)},
    }

    lines = report.formats(results)

    both = "nobody listening c_eh / c = 0.990; listened (d_eh - b) / (d - b) = 1.50x"
    assert lines == [
        "- spans, host: nobody listening c_eh / c = 1.010",
        f"- spans, bzImage: {both}",
        "- logs, host: nobody listening c_eh / c = 1.010",
        f"- logs, bzImage: {both}",
    ]
    assert 'SDK + user_events, format="eventheader", ftrace listening' in report.text(results)
    assert report.formats({"host": run(b=100, c=101)}) == ["- not measured"]


@pytest.mark.parametrize("signal", ["spans", "logs"])
def test_the_eventheader_configurations_register_eventheader_tracepoints(
    signal, monkeypatch, tmp_path
):
    fake = FakeKernel(monkeypatch, tmp_path)
    monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_TRACEFS", fake.tracefs)

    setups = [SETUPS[signal](key) for key in ("c", "c_eh")]
    names = [command.split(" ", 1)[0] for command in fake.commands]
    for setup in setups:
        setup.close()
    fake.settle()

    assert "bench_c_eh_L4K1" in names, names
    assert not any(n.startswith("bench_c_eh") and not n.endswith("K1") for n in names), names
    assert any(n.startswith("bench_c_span" if signal == "spans" else "bench_c_log") for n in names)
