# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader as an operator runs it: started before the apps, it gets a short job's records
from the first one; it records several services at once, or every service; and what it
holds goes away with it. Nothing here registers the apps' tracepoints: the apps and the
reader do, as in production."""

from __future__ import annotations

import pytest

from opentelemetry_exporter_userevents.abi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.record.tracepoints import parse_tracepoint
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


def test_every_prefix_whose_tracepoints_match_our_schemas(tracefs, prefix, tmp_path, data):
    """``--prefix '*'``: services that appear while it runs are recorded from its next
    rescan (a service waits until it is listened to, as a long-running one would be), and a
    tracepoint with one of our names but another format is left alone."""
    data.register(f"{prefix}x_span u32 not_ours", 0)  # our name shape, a foreign format
    reader, output = proc.reader(tmp_path, "--prefix", "*", "--rescan-interval", "0.2")
    apps = [proc.app(f"{prefix}{n}", f"service-{n}", "--wait-listened") for n in range(2)]
    results = [proc.finished(app) for app in apps]
    mine = [f"{prefix}{n}" for n in range(2)]
    assert wait_until(
        lambda: sum(f'"service-{n}"' in output.read_text() for n in range(2)) == 2, 30
    ), (mine, output.read_text()[-2000:])
    assert wait_until(lambda: proc.items(output) >= 26, 30), output.read_text()[-3000:]
    err = proc.stop(reader)

    got_spans, _ = proc.requests(output)
    mine = {k: v for k, v in flatten(got_spans, "spans").items() if "service-" in v}
    assert mine == flatten([r["spans"] for r in results], "spans")
    assert f"not recording {prefix}x_span" in err
    assert "service-0 (13)" in err and "service-1 (13)" in err


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
