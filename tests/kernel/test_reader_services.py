# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader as an operator runs it: started before the apps, it gets a short job's records
from the first one; it records several services at once, or every service; and what it
holds goes away with it. Nothing here registers the apps' tracepoints: the apps and the
reader do, as in production."""

from __future__ import annotations

import os
import signal

import pytest

from opentelemetry_exporter_userevents.abi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.record.tracepoints import announce_commands, parse_tracepoint
from tests.support import hostile_writer
from tests.support import reader_process as proc
from tests.support.kernel_support import wait_until
from tests.support.otlp import flatten

pytestmark = pytest.mark.kernel


def _tracepoints(tracefs, prefix: str) -> list[str]:
    return [
        f"{system}/{name}"
        for system in (USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM)
        for name in tracefs.events(system)
        if (parsed := parse_tracepoint(name)) is not None and parsed.prefix == prefix
    ]


def test_a_reader_started_first_gets_a_short_jobs_records_from_the_first(tracefs, prefix, tmp_path):
    assert _tracepoints(tracefs, prefix) == []  # nobody registered them
    reader, output = proc.reader(tmp_path, "--prefix", prefix)
    result = proc.finished(proc.app(prefix, "nightly-job"))  # writes at once and exits
    assert wait_until(lambda: proc.items(output) >= 13, 30), output.read_text()
    err = proc.stop(reader)

    got_spans, got_logs = proc.requests(output)
    want_spans, want_logs = flatten([result["spans"]], "spans"), flatten([result["logs"]], "logs")
    assert len(want_spans) == 6 and len(want_logs) == 7
    assert flatten(got_spans, "spans") == want_spans  # every span, with its resource
    assert flatten(got_logs, "logs") == want_logs
    assert "lost 0" in err and "without resource" not in err
    assert "from nightly-job (13)" in err


def test_one_reader_records_several_services_and_says_which_each_came_from(
    tracefs, prefix, tmp_path
):
    checkout, billing = f"{prefix}c", f"{prefix}b"
    reader, output = proc.reader(tmp_path, "--prefix", checkout, "--prefix", billing)
    tree, tree_output = proc.reader(
        tmp_path, "--prefix", checkout, "--prefix", billing, "--format", "tree"
    )
    results = [
        proc.finished(proc.app(checkout, "checkout")),
        proc.finished(proc.app(billing, "billing")),
    ]
    assert wait_until(lambda: proc.items(output) >= 26, 30), output.read_text()
    assert wait_until(lambda: tree_output.read_text().count("trace ") >= 2, 30)
    err = proc.stop(reader)
    proc.stop(tree)

    got_spans, got_logs = proc.requests(output)
    want_spans = flatten([r["spans"] for r in results], "spans")
    assert len(want_spans) == 12 and flatten(got_spans, "spans") == want_spans
    assert flatten(got_logs, "logs") == flatten([r["logs"] for r in results], "logs")
    assert "from billing (13), checkout (13)" in err
    text = tree_output.read_text()
    trace_lines = [line for line in text.splitlines() if line.startswith("trace ")]
    assert sorted(line.split()[-1] for line in trace_lines) == ["billing", "checkout"]


def _mine(requests: list[dict], kind: str, services: list[str]) -> dict[str, str]:
    """The spans or logs of ``services`` only (a reader of every prefix records others)."""
    return {
        key: text
        for key, text in flatten(requests, kind).items()
        if any(f'"{service}"' in text for service in services)
    }


def test_every_prefix_is_recorded_from_its_first_record(tracefs, prefix, tmp_path, data):
    """``--prefix '*'`` started first; then short jobs of prefixes it cannot know, one in
    each layout (single-format on every kernel, multi-format where the kernel has it), that
    register, write at once and exit: each is recorded whole, resource included, because it
    announced itself and waited until the reader listened. A tracepoint with one of our
    names but another format is left alone."""
    data.register(f"{prefix}x_span u32 not_ours", 0)  # our name shape, a foreign format
    reader, output = proc.reader(tmp_path, "--prefix", "*")
    services = [f"{prefix}-job-{n}" for n in range(2)]
    single = {"OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT": "false"}
    apps = [proc.app(f"{prefix}{n}", services[n], env=single if n else None) for n in range(2)]
    results = [proc.finished(app) for app in apps]  # nothing waits for the reader here
    assert wait_until(lambda: len(_mine(proc.requests(output)[0], "spans", services)) == 12, 30), (
        output.read_text()[-3000:]
    )
    assert wait_until(lambda: len(_mine(proc.requests(output)[1], "logs", services)) == 14, 30)
    err = proc.stop(reader)

    got_spans, got_logs = proc.requests(output)
    assert _mine(got_spans, "spans", services) == flatten([r["spans"] for r in results], "spans")
    assert _mine(got_logs, "logs", services) == flatten([r["logs"] for r in results], "logs")
    assert f"not recording {prefix}x_span" in err
    assert f"{services[0]} (13)" in err and f"{services[1]} (13)" in err
    assert "may have lost their first records" not in err, err


def test_a_reader_of_every_prefix_names_services_whose_first_records_it_missed(
    tracefs, prefix, tmp_path
):
    """What ``*`` cannot record is said: a writer that gave up waiting while the reader was
    stalled (SIGSTOP), and an app that does not announce itself (as releases before
    announcements, here with announcements turned off), found by a rescan."""
    reader, output = proc.reader(tmp_path, "--prefix", "*", "--rescan-interval", "0.2")
    stalled, old = f"{prefix}stalled", f"{prefix}old"
    reader.send_signal(signal.SIGSTOP)
    try:
        env = {"OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT": "300"}
        late = proc.app(stalled, f"{prefix}-stalled", env=env)
        _, late_err = late.communicate(timeout=120)
        assert late.returncode == 0, late_err
    finally:
        reader.send_signal(signal.SIGCONT)
    assert f"did not listen to prefix '{stalled}' within 300 ms" in late_err
    env = {"OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT": "0"}
    result = proc.finished(proc.app(old, f"{prefix}-old", "--wait-listened", env=env))
    assert wait_until(lambda: proc.items(output) >= 13, 30), output.read_text()[-3000:]
    err = proc.stop(reader)

    assert f"{stalled} (gave up waiting after 300 ms;" in err, err
    assert f"{old} (not announced; listened " in err, err
    got_spans, _ = proc.requests(output)
    want = flatten([result["spans"]], "spans")
    assert _mine(got_spans, "spans", [f"{prefix}-old"]) == want  # it waited to be found


def test_two_readers_of_every_prefix_each_record_a_job_whole(tracefs, prefix, tmp_path):
    first, first_output = proc.reader(tmp_path, "--prefix", "*")
    second, second_output = proc.reader(tmp_path, "--prefix", "*")
    service = f"{prefix}-twice"
    result = proc.finished(proc.app(prefix, service))
    want = flatten([result["spans"]], "spans")
    for output in (first_output, second_output):
        spans = lambda output=output: _mine(proc.requests(output)[0], "spans", [service])  # noqa: E731
        assert wait_until(lambda spans=spans: len(spans()) == 6, 30), output.read_text()[-2000:]
        assert spans() == want
    for reader in (first, second):
        assert "may have lost their first records" not in proc.stop(reader)


def test_a_killed_reader_of_every_prefix_costs_an_app_its_timeout_once(tracefs, prefix, tmp_path):
    """SIGKILL leaves the reader's instances, the announcement one still listening: an app
    then waits its timeout for nobody (once: its second exporter does not wait), says so,
    and goes on. The next reader removes them."""
    reader, _ = proc.reader(tmp_path, "--prefix", "*")
    reader.kill()
    reader.communicate(timeout=60)
    env = {"OTEL_EXPORTER_USER_EVENTS_ANNOUNCE_TIMEOUT": "500"}
    app = proc.app(prefix, f"{prefix}-after-kill", env=env)
    _, app_err = app.communicate(timeout=120)
    assert app.returncode == 0, app_err
    assert f"did not listen to prefix '{prefix}' within 500 ms" in app_err
    assert app_err.count("did not listen") == 1, app_err  # once, not once per exporter
    stale = [
        i for i in tracefs.instances() if i.startswith(f"otel-userevents-announce.{reader.pid}.")
    ]
    assert stale, tracefs.instances()
    proc.stop(proc.reader(tmp_path, "--prefix", "*")[0])
    assert not [i for i in tracefs.instances() if i in stale]


def test_hostile_announcements_are_counted_and_a_genuine_job_is_still_recorded_whole(
    tracefs, prefix, tmp_path, kernel_has_multi_format
):
    """A neighbour (raw ioctl and writev, nothing of the package) writes announcements that
    make no sense (a terminal escape for a prefix, an unknown event, a prefix too long) and
    a flood of 1,100 valid ones for prefixes that never register: the reader counts them,
    keeps 1,024 prefixes, shows no raw escape, and still records a job that comes after."""
    reader, output = proc.reader(tmp_path, "--prefix", "*")
    writer = hostile_writer.Writer(
        os.path.join(tracefs.path, "user_events_data"), kernel_has_multi_format
    )
    writer.register("announce", *announce_commands())
    assert wait_until(lambda: writer.enabled("announce"), 30)
    command = writer.commands["announce"]
    for values in (
        {"prefix": hostile_writer.ESCAPES, "wait_ms": 1},
        {"prefix": f"{prefix}ok", "event": 9},
        {"prefix": "x" * 300},
    ):
        writer.write("announce", hostile_writer.pack(command, values))
    for number in range(1100):
        writer.write("announce", hostile_writer.pack(command, {"prefix": f"flood{number}"}))
    writer.close()
    service = f"{prefix}-after-flood"
    result = proc.finished(proc.app(f"{prefix}real", service))
    spans = lambda: _mine(proc.requests(output)[0], "spans", [service])  # noqa: E731
    assert wait_until(lambda: len(spans()) == 6, 30), output.read_text()[-2000:]
    err = proc.stop(reader)

    assert spans() == flatten([result["spans"]], "spans")
    assert "3 announcements that made no sense" in err, err
    assert "announced prefixes forgotten (the oldest, over 1024)" in err, err
    assert "may have lost their first records" not in err, err
    assert "\x1b" not in err and "\u009b" not in err


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_what_the_reader_held_goes_away_with_it(tracefs, prefix, tmp_path, how):
    reader, _ = proc.reader(tmp_path, "--prefix", prefix)
    assert len(_tracepoints(tracefs, prefix)) >= 12  # span, resource, logs, metrics
    if how == "SIGINT":
        proc.stop(reader)
    else:
        reader.kill()
        reader.communicate(timeout=60)
        # The kernel closed its file, so its registrations are gone; the instance it left
        # still listens, until the next reader removes it at start.
        proc.stop(proc.reader(tmp_path, "--prefix", f"{prefix}other")[0])
    # The kernel deletes each tracepoint once its last user is gone.
    assert wait_until(lambda: _tracepoints(tracefs, prefix) == [], 30)
