# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The readers' private tracefs instances (reader/live/tracefs_instance.py): names that carry the
maker's pid namespace, stale ones judged only in that namespace (a reader in a container
must not remove a live host reader's instance), earlier releases' names left alone, and
the lifetime TraceReader and HistCollector share. The kernel side is in
tests/kernel/test_reader.py and test_hist.py."""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs, TracefsError
from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.hist.collector import (
    HIST_INSTANCE_PREFIX,
    HistCollector,
)
from opentelemetry_exporter_userevents.reader.live import tracefs_instance as ti
from opentelemetry_exporter_userevents.reader.live.trace_reader import INSTANCE_PREFIX, TraceReader
from opentelemetry_exporter_userevents.reader.live.tracefs_instance import (
    LIVE,
    OLD_NAME,
    OTHER_NAMESPACE,
    PROC_NOT_OURS,
    STALE,
    InstanceName,
    Namespace,
    TracefsInstance,
    judge,
    new_instance_name,
    parse_instance_name,
    process_start,
    remove_stale_instances,
)

HERE = Namespace.here()
OWN_NS = os.stat("/proc/self/ns/pid").st_ino
START = process_start(os.getpid())


class FakeTracefs(Tracefs):
    """A directory laid out as tracefs: ``instances/`` whose entries are plain directories;
    what is enabled, triggered or undone in them is noted."""

    def __init__(self, path: Path) -> None:
        (path / "instances").mkdir()
        (path / "user_events_data").write_bytes(b"")
        (path / "user_events_status").write_text("")
        super().__init__(str(path))
        self.calls: list[tuple[str, ...]] = []
        self.busy: set[str] = set()

    def remove_instance(self, instance: str) -> None:
        if instance in self.busy:
            raise OSError(errno.EBUSY, "Device or resource busy")
        self.calls.append(("rmdir", instance))
        super().remove_instance(instance)

    def set_enabled(
        self, system: str, name: str, enabled: bool, instance: str | None = None
    ) -> None:
        assert instance is not None and os.path.isdir(self.instance_dir(instance))
        self.calls.append(("enable" if enabled else "disable", system, name, instance))

    def set_trigger(self, system: str, name: str, trigger: str, instance: str) -> None:
        assert os.path.isdir(self.instance_dir(instance))
        self.calls.append(("trigger", system, name, trigger, instance))

    def remove_trigger(self, system: str, name: str, trigger: str, instance: str) -> None:
        self.calls.append(("untrigger", system, name, trigger, instance))
        if name == "gone":
            raise FileNotFoundError(name)

    def add(self, *names: str) -> None:
        for name in names:
            os.mkdir(self.instance_dir(name))


@pytest.fixture
def tracefs(tmp_path) -> FakeTracefs:
    return FakeTracefs(tmp_path)


# --- names ----------------------------------------------------------------------------


def test_a_new_name_carries_pid_start_number_and_pid_namespace():
    first, second = new_instance_name(INSTANCE_PREFIX), new_instance_name(INSTANCE_PREFIX)
    assert first != second
    parsed = parse_instance_name(INSTANCE_PREFIX, first)
    assert parsed is not None
    assert (parsed.pid, parsed.start, parsed.pid_namespace) == (os.getpid(), START, OWN_NS)
    assert first == f"{INSTANCE_PREFIX}{os.getpid()}.{START}.{parsed.number}.pidns{OWN_NS}"


def test_a_name_without_a_readable_namespace_says_0():
    name = new_instance_name(INSTANCE_PREFIX, Namespace(None, True))
    parsed = parse_instance_name(INSTANCE_PREFIX, name)
    assert name.endswith(".pidns0") and parsed is not None and parsed.pid_namespace == 0


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("otel-userevents.12.345.6.pidns4026531836", InstanceName(12, 345, 6, 4026531836)),
        ("otel-userevents.12.345.6", InstanceName(12, 345, 6, None)),  # an earlier release's
        ("otel-userevents.12.345", None),
        ("otel-userevents.12.345.6.pidns", None),
        ("otel-userevents.12.345.6.pidnsx", None),
        ("otel-userevents.12.345.6.7", None),
        ("otel-userevents-hist.12.345.6.pidns7", None),  # the other prefix
        ("otel-userevents.x.345.6.pidns7", None),
        ("my-instance", None),
    ],
)
def test_parse_instance_name(name, parsed):
    assert parse_instance_name(INSTANCE_PREFIX, name) == parsed


def test_the_two_prefixes_never_match_each_others_names():
    hist = new_instance_name(HIST_INSTANCE_PREFIX)
    reader = new_instance_name(INSTANCE_PREFIX)
    assert parse_instance_name(INSTANCE_PREFIX, hist) is None
    assert parse_instance_name(HIST_INSTANCE_PREFIX, reader) is None


def test_an_earlier_releases_pattern_does_not_match_the_new_names():
    earlier = re.compile(rf"^{re.escape(INSTANCE_PREFIX)}(\d+)\.(\d+)\.\d+$")  # as it was
    assert earlier.match(new_instance_name(INSTANCE_PREFIX)) is None


# --- judgment -------------------------------------------------------------------------

OURS = Namespace(100, proc_is_ours=True)
ALIVE = {7: 700}  # pid 7 started at 700


def _judge(pid: int, start: int, ns: int | None, namespace: Namespace = OURS) -> str:
    return judge(InstanceName(pid, start, 0, ns), namespace, ALIVE.get)


@pytest.mark.parametrize(
    ("pid", "start", "ns", "namespace", "verdict"),
    [
        (7, 700, 100, OURS, LIVE),
        (7, 699, 100, OURS, STALE),  # the pid was reused by a later process
        (8, 700, 100, OURS, STALE),  # no such process
        # made in another pid namespace: pid 8 means nothing here, whatever /proc says
        (8, 700, 200, OURS, OTHER_NAMESPACE),
        (7, 700, 200, OURS, OTHER_NAMESPACE),
        (8, 700, 0, OURS, OTHER_NAMESPACE),  # its maker could not read its namespace
        (8, 700, 100, Namespace(None, True), OTHER_NAMESPACE),  # we cannot read ours
        (8, 700, 100, Namespace(100, proc_is_ours=False), PROC_NOT_OURS),
        (8, 700, None, OURS, OLD_NAME),  # an earlier release's name: never judged
        (7, 700, None, OURS, OLD_NAME),
    ],
)
def test_judge(pid, start, ns, namespace, verdict):
    assert _judge(pid, start, ns, namespace) == verdict


def test_here_is_this_process_namespace():
    assert HERE == Namespace(OWN_NS, proc_is_ours=True)


def test_only_stale_instances_of_this_namespace_are_removed(tracefs):
    me = os.getpid()
    live = f"{INSTANCE_PREFIX}{me}.{START}.90.pidns{OWN_NS}"
    stale = f"{INSTANCE_PREFIX}{me}.{START + 1}.91.pidns{OWN_NS}"  # an earlier process, pid reused
    foreign = f"{INSTANCE_PREFIX}{me}.{START + 1}.92.pidns{OWN_NS + 1}"
    unknown = f"{INSTANCE_PREFIX}{me}.{START + 1}.93.pidns0"
    old = f"{INSTANCE_PREFIX}{me}.{START + 1}.94"
    hist_stale = f"{HIST_INSTANCE_PREFIX}{me}.{START + 1}.95.pidns{OWN_NS}"
    tracefs.add(live, stale, foreign, unknown, old, hist_stale, "someone-elses")
    cleared: list[str] = []

    sweep = remove_stale_instances(tracefs, INSTANCE_PREFIX, "keep", cleared.append)

    assert sweep.removed == [stale] and cleared == [stale]
    assert sweep.left_alone == {foreign: OTHER_NAMESPACE, unknown: OTHER_NAMESPACE, old: OLD_NAME}
    assert sorted(tracefs.instances()) == sorted(
        [live, foreign, unknown, old, hist_stale, "someone-elses"]
    )


def test_records_left_in_a_removed_stale_instance_are_counted(tracefs, monkeypatch):
    """A reader killed leaves its instance enabled: apps keep writing into it until the next
    reader removes it, and what it holds then is lost with it, counted."""
    me = os.getpid()
    stale = f"{INSTANCE_PREFIX}{me}.{START + 1}.91.pidns{OWN_NS}"
    empty = f"{INSTANCE_PREFIX}{me}.{START + 2}.92.pidns{OWN_NS}"
    tracefs.add(stale, empty)
    for cpu, entries in ((0, 5), (1, 7)):
        directory = Path(tracefs.instance_dir(stale), "per_cpu", f"cpu{cpu}")
        directory.mkdir(parents=True)
        (directory / "stats").write_text(f"entries: {entries}\noverrun: 3\nbytes: 100\n")
    monkeypatch.setattr(  # tracefs removes an instance with its per-CPU files
        tracefs, "remove_instance", lambda name: shutil.rmtree(tracefs.instance_dir(name))
    )

    instance = TracefsInstance(tracefs, INSTANCE_PREFIX)
    instance.create()

    assert sorted(instance.removed_stale) == sorted([stale, empty])
    assert instance.unread_in_stale == 12  # the entries of each CPU; none in the other


def test_a_busy_stale_instance_is_skipped_and_the_kept_one_never_judged(tracefs):
    me = os.getpid()
    busy = f"{INSTANCE_PREFIX}{me}.{START + 1}.1.pidns{OWN_NS}"
    kept = f"{INSTANCE_PREFIX}{me}.{START + 1}.2.pidns{OWN_NS}"
    tracefs.add(busy, kept)
    tracefs.busy.add(busy)
    sweep = remove_stale_instances(tracefs, INSTANCE_PREFIX, kept)
    assert sweep.removed == [] and sweep.left_alone == {}
    assert sorted(tracefs.instances()) == sorted([busy, kept])


def test_a_reader_whose_proc_shows_another_namespace_removes_nothing(tracefs):
    stale = f"{INSTANCE_PREFIX}{os.getpid()}.{START + 1}.1.pidns{OWN_NS}"
    tracefs.add(stale)
    sweep = remove_stale_instances(
        tracefs, INSTANCE_PREFIX, "keep", namespace=Namespace(OWN_NS, proc_is_ours=False)
    )
    assert sweep.removed == [] and sweep.left_alone == {stale: PROC_NOT_OURS}


# --- lifetime -------------------------------------------------------------------------


def test_create_enable_trigger_close_undoes_in_order_and_is_idempotent(tracefs):
    instance = TracefsInstance(tracefs, INSTANCE_PREFIX)
    instance.close()  # never created: nothing
    instance.create()
    name = instance.name
    assert name in tracefs.instances()
    instance.enable("user_events_multi", "otel_span.1")
    instance.enable("user_events_multi", "otel_span.1")  # again (a new event id): undone once
    instance.set_trigger("user_events", "otel_log_info_1", "hist:keys=scope")
    instance.set_trigger("user_events", "gone", "hist:keys=name")
    instance.close()
    instance.close()

    assert tracefs.calls == [
        ("enable", "user_events_multi", "otel_span.1", name),
        ("enable", "user_events_multi", "otel_span.1", name),
        ("trigger", "user_events", "otel_log_info_1", "hist:keys=scope", name),
        ("trigger", "user_events", "gone", "hist:keys=name", name),
        ("disable", "user_events_multi", "otel_span.1", name),
        ("untrigger", "user_events", "otel_log_info_1", "hist:keys=scope", name),
        ("untrigger", "user_events", "gone", "hist:keys=name", name),  # gone: no error
        ("rmdir", name),
    ]
    assert name not in tracefs.instances() and instance.cleanup_error is None


def test_create_removes_stale_instances_and_reports_those_left_alone(tracefs):
    stale = f"{INSTANCE_PREFIX}{os.getpid()}.{START + 1}.1.pidns{OWN_NS}"
    foreign = f"{INSTANCE_PREFIX}1.2.3.pidns{OWN_NS + 1}"
    tracefs.add(stale, foreign)
    cleared: list[str] = []
    instance = TracefsInstance(tracefs, INSTANCE_PREFIX, before_stale_removal=cleared.append)
    instance.create()
    assert instance.removed_stale == [stale] and cleared == [stale]
    assert instance.left_alone == {foreign: OTHER_NAMESPACE}
    instance.close()


def test_an_instance_that_cannot_be_removed_says_why(tracefs):
    instance = TracefsInstance(tracefs, INSTANCE_PREFIX)
    instance.create()
    tracefs.busy.add(instance.name)
    instance.close()
    assert instance.cleanup_error == (
        f"could not remove instance {instance.name}: [Errno 16] Device or resource busy"
    )


def test_an_instance_removed_behind_our_back_is_no_error(tracefs):
    instance = TracefsInstance(tracefs, INSTANCE_PREFIX)
    instance.create()
    os.rmdir(tracefs.instance_dir(instance.name))
    instance.close()
    assert instance.cleanup_error is None


def test_without_user_events_create_says_so_and_makes_nothing(tmp_path):
    tracefs = FakeTracefs(tmp_path)
    os.unlink(tmp_path / "user_events_data")
    instance = TracefsInstance(tracefs, INSTANCE_PREFIX)
    with pytest.raises(TracefsError, match="no user_events"):
        instance.create()
    assert tracefs.instances() == []
    instance.close()
    assert tracefs.calls == []


def test_trace_reader_and_hist_collector_use_it(tracefs):
    reader = TraceReader(tracefs, "otel", hold=False)
    collector = HistCollector(tracefs, ["otel"], hold=False)
    for owner, prefix in ((reader, INSTANCE_PREFIX), (collector, HIST_INSTANCE_PREFIX)):
        assert owner.tracefs_instance.prefix == prefix
        assert owner.instance == owner.tracefs_instance.name
        parsed = parse_instance_name(prefix, owner.instance)
        assert parsed is not None and parsed.pid_namespace == OWN_NS
    assert collector.tracefs_instance.before_stale_removal == collector._clear_triggers


# --- status ---------------------------------------------------------------------------


def test_status_reports_each_readers_instance_and_what_a_reader_here_would_do(
    tracefs, capsys, monkeypatch
):
    me = os.getpid()
    live = f"{INSTANCE_PREFIX}{me}.{START}.1.pidns{OWN_NS}"
    stale = f"{HIST_INSTANCE_PREFIX}{me}.{START + 1}.2.pidns{OWN_NS}"
    foreign = f"{INSTANCE_PREFIX}1.2.3.pidns{OWN_NS + 1}"
    old = f"{INSTANCE_PREFIX}1.2.3"
    tracefs.add(live, stale, foreign, old, "someone-elses")
    monkeypatch.setattr(ti.Namespace, "here", classmethod(lambda cls: HERE))

    assert cli.main(["--tracefs", tracefs.path, "status"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("reader instance ")]
    assert lines == [
        f"reader instance {old}: left alone by readers here: {OLD_NAME}",
        f"reader instance {foreign}: left alone by readers here: {OTHER_NAMESPACE}",
        f"reader instance {live}: its reader runs",
        f"reader instance {stale}: stale (its reader is gone): the next reader started here "
        "removes it",
    ]
    assert "someone-elses" not in out
