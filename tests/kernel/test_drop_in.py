# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Drop-in without surprises, on the kernel: nothing raises into the application from any
entry point whatever it is handed, listened by a real tracer and detached; exports racing
shutdown never write to a descriptor the exporter gave back; README.rst's drop-in line
and its trace_pipe recipe, read out of the file and run as written, do what it says; and
the program output README.rst quotes is what the programs print now."""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents import UserEventsSpanExporter
from testbed import readme_samples
from tests.conftest import Listener
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten
from tests.support.reader_process import reader, requests, stop
from tests.support.readme_commands import CHECK_KERNEL, EXPORTING, ROOT, shell_blocks, shell_lines
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


# A small service as the drop-in line runs it: spans through the tracing API, records
# through the standard logging module, and no OpenTelemetry set-up of its own.
DROP_IN_APP = """
import logging
from opentelemetry import trace

tracer = trace.get_tracer("shop")
log = logging.getLogger("shop")
for number in range(3):
    with tracer.start_as_current_span(f"order {number}"):
        log.warning("order %d placed", number)
"""


def as_an_operator_runs_it() -> dict[str, str]:
    """The environment of an operator's shell: none of the test run's OTEL_ variables, and
    this environment's bin first on PATH (the README's ``. .venv/bin/activate``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return env


def test_the_readme_drop_in_line_exports_spans_and_logging_records(tmp_path):
    """README.rst's drop-in line, as written, with a reader running: the app's spans and
    its ``logging`` records arrive, each record in its span."""
    (line,) = [
        line for block in shell_blocks(EXPORTING) for line in block
        if "opentelemetry-instrument " in line
    ]  # fmt: skip
    (tmp_path / "app.py").write_text(DROP_IN_APP)
    recording, output = reader(tmp_path, "--prefix", "otel")  # the line's default prefix

    app = subprocess.run(
        ["sh", "-c", line], cwd=tmp_path, env=as_an_operator_runs_it(),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert app.returncode == 0, app.stderr

    def arrived() -> tuple[list[dict], list[dict]]:
        spans, logs = requests(output) if output.exists() else ([], [])
        found = flatten(spans, "spans"), flatten(logs, "logs")
        return [json.loads(x)["item"] for x in found[0].values()], [
            json.loads(x)["item"] for x in found[1].values()
        ]

    wait_until(lambda: [len(x) for x in arrived()] == [3, 3], 60)
    stop(recording)
    spans, logs = arrived()
    assert sorted(s["name"] for s in spans) == ["order 0", "order 1", "order 2"]
    assert sorted(x["body"]["stringValue"] for x in logs) == [
        "order 0 placed", "order 1 placed", "order 2 placed",
    ], app.stderr  # fmt: skip
    span_of = {s["name"]: (s["traceId"], s["spanId"]) for s in spans}
    for log in logs:
        number = log["body"]["stringValue"].split()[1]
        assert (log["traceId"], log["spanId"]) == span_of[f"order {number}"]
        assert log["severityText"] == "WARN"  # the SDK handler's text for WARNING


LOG_LINE = r" otel_log_info\S*: .*checkout \d+ done"
"""An info log of examples/app.py as trace_pipe prints it (the first may precede the enable)."""


def enabled_files() -> dict[str, str]:
    """Every enable file of an ``otel_`` user_events tracepoint, either layout, and what it
    reads. An event the kernel deletes meanwhile (its last writer gone) is left out: its
    files fail with ENODEV between the listing and the read."""
    found = {}
    for name in sorted(glob.glob("/sys/kernel/tracing/events/user_events*/otel_*/enable")):
        try:
            with open(name) as enable:
                found[name] = enable.read().strip()
        except OSError:
            pass
    return found


def tracing_state() -> dict[str, object]:
    """What decides whether the top instance's ``trace_pipe`` shows anything: its
    ``tracing_on`` (a ``trace-cmd record`` cut short leaves it 0) and the processes that
    have a ``trace_pipe`` open (a reader there takes the events from everyone else)."""
    state: dict[str, object] = {}
    try:
        with open("/sys/kernel/tracing/tracing_on") as f:
            state["tracing_on"] = f.read().strip()
    except OSError as error:
        state["tracing_on"] = repr(error)
    holders = []
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            if os.readlink(fd).endswith("/trace_pipe"):
                holders.append(fd.split("/")[2])
        except OSError:
            pass
    state["trace_pipe_open_in"] = sorted(set(holders))
    return state


def test_the_readme_trace_pipe_recipe_shows_spans_and_its_clean_up_disables_them():
    """ "Watch them", as written: the app started in the background, its tracepoints waited
    for and enabled, ``cat trace_pipe`` read until a span and a log came (then Ctrl-C, as
    an operator stops it); then the clean-up, after which nothing the recipe enabled is."""
    blocks = [block for block in shell_blocks(EXPORTING) if "/sys/kernel/tracing" in str(block)]
    watch, *clean_up = blocks
    assert watch[0].endswith(" &") and watch[-1].startswith("cat "), watch
    assert clean_up, "the recipe has no step that disables what it enabled"
    # As the README says, no other app of ours runs: the wait would take its tracepoints for
    # the app's. An earlier test's go when the kernel's delayed work deletes them, which a
    # busy guest ran late (CI: the old ones enabled, the app's never, trace_pipe empty).
    left = wait_until(lambda: not enabled_files(), 60)
    assert left, f"tracepoints of an earlier test still there: {enabled_files()}"
    before = tracing_state()  # shown if the trace stays empty
    env = as_an_operator_runs_it()
    background = subprocess.Popen(  # "&": the shell runs it beside the next lines
        ["sh", "-c", watch[0].removesuffix("&")], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    reading = None
    try:
        for line in watch[1:-1]:
            subprocess.run(["sh", "-c", line], cwd=ROOT, env=env, check=True, timeout=300,
                           stdout=subprocess.DEVNULL)  # fmt: skip
        reading = subprocess.Popen(
            ["sh", "-c", watch[-1]], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        seen: list[str] = []

        def read() -> None:
            assert reading is not None and reading.stdout is not None
            for text in reading.stdout:
                seen.append(text)

        threading.Thread(target=read, daemon=True).start()

        def both() -> bool:
            text = "".join(seen)
            return "name=GET /cart/{id}" in text and bool(re.search(LOG_LINE, text))

        wait_until(both, 120)
        os.killpg(reading.pid, signal.SIGINT)  # Ctrl-C
        reading.wait(timeout=60)
        trace = "".join(seen)
        where = f"before: {before}, now: {tracing_state()}, enabled: {enabled_files()}"
        assert " otel_span" in trace and "name=GET /cart/{id}" in trace, (where, trace[-2000:])
        assert re.search(LOG_LINE, trace), trace[-2000:]
        assert background.poll() is None, "the app ended"
        enabled = enabled_files()
        assert any("/otel_span" in name for name in enabled), enabled
        assert set(enabled.values()) == {"1"}, enabled

        for block in clean_up:
            for line in block:
                subprocess.run(["sh", "-c", line], cwd=ROOT, env=env, check=True, timeout=300,
                               stdout=subprocess.DEVNULL)  # fmt: skip

        after = enabled_files()
        assert after.keys() == enabled.keys() and set(after.values()) == {"0"}, after
    finally:
        if reading is not None and reading.poll() is None:
            os.killpg(reading.pid, signal.SIGKILL)
            reading.wait()
        os.killpg(background.pid, signal.SIGTERM)
        background.wait(timeout=60)
        for name in enabled_files():  # whatever the test got to, for the tests after it
            try:
                with open(name, "w") as enable:
                    enable.write("0")
            except OSError:
                pass  # gone with the app


def test_the_readmes_samples_are_what_the_programs_print_now():
    """Each block README.rst marks ``.. sample: NAME`` against the same command run now
    (testbed/readme_samples.py), ids, times, durations and timing's counts blanked. A
    difference is fixed by ``python -m testbed.readme_samples --write``, or is a bug."""
    fresh = readme_samples.run_all()
    assert sorted(fresh) == sorted(readme_samples.SAMPLES)
    found = readme_samples.differences(readme_samples.documented(), fresh)
    assert found == {}, "\n".join(f"sample {name}:\n{diff}" for name, diff in found.items())


def test_the_readme_kernel_check_says_user_events_is_here():
    """README's "Check your kernel" line, as root on a kernel with user_events: it prints
    the path, the answer README reads as "user_events is here"."""
    (line,) = shell_lines(CHECK_KERNEL)
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "/sys/kernel/tracing/user_events_data")
