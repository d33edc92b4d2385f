# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the host sees of a writer process (reader/views/process_view.py): container ids from each
runtime's cgroup paths, pids from NStgid, the merge into a record's resource, the per-pid
views, the reader's own namespaces, and the join_stage joining each record's view (both
output paths); a join_stage without views is unchanged."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents.reader.cli import parser
from opentelemetry_exporter_userevents.reader.commands import common
from opentelemetry_exporter_userevents.reader.commands import record as record_command
from opentelemetry_exporter_userevents.reader.commands.common import rebuilt_parts
from opentelemetry_exporter_userevents.reader.decode.decoder import DecoderStats, TraceRecord
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord, JoinStage
from opentelemetry_exporter_userevents.reader.live.eventheader_providers import ProviderDiscovery
from opentelemetry_exporter_userevents.reader.native.native_core import CoreChoice
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json, otlp_json_direct
from opentelemetry_exporter_userevents.reader.outputs.output import OtlpJsonOutput
from opentelemetry_exporter_userevents.reader.views import process_view
from opentelemetry_exporter_userevents.reader.views.process_view import (
    HOST_PID_NEEDED,
    HOST_UTS_NEEDED,
    NO_VIEW,
    PROC_PID_INIT_INO,
    PROC_UTS_INIT_INO,
    ProcessView,
    ProcessViews,
    ReaderNamespaces,
    ThreadGroup,
    container_id_of_cgroup,
    container_id_of_path,
    live_views,
    merged_resource,
    read_view,
    thread_group_of_status,
)
from tests.reader.join.test_join_stage import log_record, resource_record, span_record
from tests.support.sdk_rebuild import SdkRebuilder
from tests.support.span_fixtures import make_logs, make_spans

ID = "0123456789abcdef" * 4
ID2 = "fedcba9876543210" * 4
UID = "7a3b2c1d_0000_4e5f_8a9b_0c1d2e3f4a5b"


# --- container ids from each runtime's cgroup paths -------------------------------------

RUNTIME_PATHS = [
    # Docker, cgroupfs driver (v1 and v2)
    f"/docker/{ID}",
    # Docker, systemd driver; cri-dockerd
    f"/system.slice/docker-{ID}.scope",
    # Docker rootless (systemd)
    f"/user.slice/user-1000.slice/user@1000.service/user.slice/docker-{ID}.scope",
    # Kubernetes, containerd, cgroupfs driver
    f"/kubepods/besteffort/pod{UID}/{ID}",
    f"/kubepods/pod{UID}/{ID}",  # guaranteed QoS: no QoS level
    # Kubernetes, containerd, systemd driver
    f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID}.slice/"
    f"cri-containerd-{ID}.scope",
    # Kubernetes, CRI-O, systemd driver
    f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID}.slice/crio-{ID}.scope",
    # Kubernetes with docker (cri-dockerd), systemd driver
    f"/kubepods.slice/kubepods-pod{UID}.slice/docker-{ID}.scope",
    # Podman, systemd (rootful), with and without its "container" sub-cgroup
    f"/machine.slice/libpod-{ID}.scope",
    f"/machine.slice/libpod-{ID}.scope/container",
    # Podman rootless
    f"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope",
    f"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container",
    # Podman, cgroupfs driver
    f"/libpod_parent/libpod-{ID}",
    # a reader in a private cgroup namespace sees other containers' paths relative to its own
    f"/../../system.slice/docker-{ID}.scope",
    # systemd inside a container: the process is still in the container
    f"/docker/{ID}/system.slice/nginx.service",
]


@pytest.mark.parametrize("path", RUNTIME_PATHS)
def test_each_runtimes_cgroup_path_names_the_container(path):
    assert container_id_of_path(path) == ID
    v2 = f"0::{path}\n"
    assert container_id_of_cgroup(v2) == ID
    v1 = "".join(
        f"{n}:{controllers}:{path}\n"
        for n, controllers in enumerate(
            ["cpu,cpuacct", "memory", "pids", "name=systemd", "devices"], start=1
        )
    )
    assert container_id_of_cgroup(v1) == ID
    hybrid = f"12:memory:{path}\n1:name=systemd:{path}\n0::{path}\n"
    assert container_id_of_cgroup(hybrid) == ID


def test_the_deepest_container_is_the_process_s():
    assert container_id_of_path(f"/docker/{ID}/docker/{ID2}") == ID2
    assert container_id_of_path(f"/system.slice/docker-{ID}.scope/docker-{ID2}.scope") == ID2


NOT_CONTAINERS = [
    "/",
    "",
    "/user.slice/user-1000.slice/session-145.scope",
    "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-1234.scope",
    "/system.slice/sshd.service",
    "/system.slice/docker.service",
    "/init.scope",
    f"/kubepods/besteffort/pod{UID}",  # the pod, not a container
    f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID}.slice",
    # the runtimes' monitors hold conmon, never the app
    f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID}.slice/"
    f"crio-conmon-{ID}.scope",
    f"/machine.slice/libpod-conmon-{ID}.scope",
    f"/system.slice/crio-conmon-{ID}.scope",
    # not exactly 64 lowercase hex digits
    f"/docker/{ID[:-1]}",
    f"/docker/{ID}0",
    f"/docker/{ID.upper()}",
    f"/system.slice/docker-{ID}x.scope",
    f"/system.slice/docker-{ID[:32]}.scope",
    "/process_api/21f8d7c50b68d358a711041573f4e56f",
    # unknown prefixes, escapes, text around an id
    f"/system.slice/evil-{ID}.scope",
    f"/docker/\x1b]0;{ID}\x07",
    f"/docker/ {ID}",
    f"/docker/{ID}.service",
    f"/docker-{ID}.scope.scope",
]


@pytest.mark.parametrize("path", NOT_CONTAINERS)
def test_other_paths_name_no_container(path):
    assert container_id_of_path(path) is None
    assert container_id_of_cgroup(f"0::{path}\n") is None


def test_a_path_is_one_line():
    assert container_id_of_path(f"/docker/{ID}\n") is None


def test_the_v2_path_comes_before_the_v1_paths():
    text = f"4:memory:/docker/{ID2}\n0::/system.slice/docker-{ID}.scope\n"
    assert container_id_of_cgroup(text) == ID
    assert container_id_of_cgroup(f"4:memory:/docker/{ID2}\n0::/\n") == ID2


def test_a_cgroup_text_not_of_the_kernels_shape_names_no_container():
    # A cgroup named "x\n0::/docker/<id>" would list the unified hierarchy twice.
    assert container_id_of_cgroup(f"0::/user.slice/x\n0::/docker/{ID}\n") is None
    assert container_id_of_cgroup(f"4:memory:/a\n4:memory:/docker/{ID}\n") is None
    # lines that are no cgroup line are not read as paths
    assert container_id_of_cgroup(f"/docker/{ID}\n") is None
    assert container_id_of_cgroup(f"x::/docker/{ID}\n") is None
    assert container_id_of_cgroup(f"0::docker/{ID}\n") is None


@given(st.text(max_size=300))
@settings(max_examples=400, deadline=None)
def test_arbitrary_text_gives_an_id_only_where_one_is_written(text):
    found = container_id_of_cgroup(text)
    if found is not None:
        assert re.fullmatch(r"[0-9a-f]{64}", found) and found in text
    assert container_id_of_path(text) in (None, *re.findall(r"[0-9a-f]{64}", text))


@given(
    st.lists(st.text(alphabet=st.characters(blacklist_characters="/"), max_size=80), max_size=6),
    st.sampled_from(["", "docker-", "crio-", "libpod-", "cri-containerd-"]),
    st.sampled_from(["", ".scope"]),
    st.lists(st.sampled_from(["container", "init.scope", "x.service"]), max_size=1),
)
@settings(max_examples=200, deadline=None)
def test_a_runtimes_segment_is_found_below_any_parents(parents, prefix, suffix, below):
    path = "/" + "/".join([*parents, f"{prefix}{ID}{suffix}", *below])
    assert container_id_of_path(path) == ID


# --- pids: Tgid and NStgid -------------------------------------------------------------


def status_text(pid: int, tgid: int, nstgid: str | None) -> str:
    lines = [
        "Name:\tpython3",
        "Umask:\t0022",
        "State:\tS (sleeping)",
        f"Tgid:\t{tgid}",
        "Ngid:\t0",
        f"Pid:\t{pid}",
        "PPid:\t1",
        "Groups:\t0 1 2",
    ]
    if nstgid is not None:
        lines += [f"NStgid:\t{nstgid}", f"NSpid:\t{pid}"]
    return "\n".join([*lines, "Threads:\t3", ""])


@pytest.mark.parametrize(
    ("pid", "tgid", "nstgid", "want"),
    [
        (4242, 4242, "4242", ThreadGroup(4242, (4242,))),  # on the host
        (4242, 4242, "4242\t1", ThreadGroup(4242, (4242, 1))),  # one container level
        (4242, 4242, "4242\t17\t1", ThreadGroup(4242, (4242, 17, 1))),  # nested
        (4250, 4242, "4242\t1", ThreadGroup(4242, (4242, 1))),  # a worker thread: its tgid
        (4242, 4242, None, ThreadGroup(4242, ())),  # a kernel without NStgid
        (4242, 4242, "4243\t1", ThreadGroup(4242, ())),  # inconsistent: not used
        (4242, 4242, "4242\tx", ThreadGroup(4242, ())),
        (4242, 4242, "", ThreadGroup(4242, ())),
        (4242, 4242, "\t".join(["4242"] * 40), ThreadGroup(4242, ())),  # too deep
    ],
)
def test_thread_group_from_status(pid, tgid, nstgid, want):
    assert thread_group_of_status(status_text(pid, tgid, nstgid)) == want


@pytest.mark.parametrize("tgid", ["", "0", "-1", "x", "99999999999", "4242 1", "٤٢"])
def test_a_status_without_a_valid_tgid_is_no_thread_group(tgid):
    text = status_text(4242, 1, "4242").replace("Tgid:\t1", f"Tgid:\t{tgid}")
    assert thread_group_of_status(text) is None
    assert thread_group_of_status("") is None


# --- the merge into a resource ----------------------------------------------------------

APP = Resource({"service.name": "checkout", "process.pid": 1}, "https://x/s")


def test_what_a_view_adds_to_the_resource():
    view = ProcessView(ID, host_pid=4242, namespace_pid=1)
    merged = merged_resource(APP, view, "node-1")
    assert dict(merged.attributes) == {
        "service.name": "checkout",
        "process.pid": 4242,
        "container.id": ID,
        "host.name": "node-1",
        "process.vpid": 1,
    }
    assert merged.schema_url == "https://x/s"


def test_the_apps_own_values_win():
    own = Resource({"container.id": "mine", "host.name": "h1", "process.pid": 1})
    merged = merged_resource(own, ProcessView(ID, 4242, 1), "node-1")
    assert dict(merged.attributes) == {
        "container.id": "mine",
        "host.name": "h1",
        "process.pid": 4242,
        "process.vpid": 1,
    }
    with_vpid = Resource({"process.pid": 1, "process.vpid": 1, "host.name": "h"})
    assert merged_resource(with_vpid, ProcessView(None, 4242, 1), "n") is with_vpid


def test_process_pid_changes_only_where_the_app_gave_its_namespaces_pid():
    view = ProcessView(None, host_pid=4242, namespace_pid=1)
    for app_pid in (4242, 7, "1", True, 1.0, None):  # the host's, another, not an int
        attributes = {"service.name": "s"} if app_pid is None else {"process.pid": app_pid}
        merged = merged_resource(Resource(attributes), view, None)
        assert merged.attributes.get("process.pid") == app_pid
        assert "process.vpid" not in merged.attributes
    # a process on the host: nothing to change
    host = Resource({"process.pid": 4242})
    assert merged_resource(host, NO_VIEW, None) is host
    assert dict(merged_resource(host, NO_VIEW, "n").attributes) == {
        "process.pid": 4242,
        "host.name": "n",
    }


def test_a_view_adds_to_the_empty_resource():
    merged = merged_resource(Resource.get_empty(), ProcessView(ID, 4242, 1), "n")
    assert dict(merged.attributes) == {"container.id": ID, "host.name": "n"}


# --- views from a /proc -----------------------------------------------------------------


def fake_process(
    proc: Path, pid: int, cgroup: str | None, tgid: int | None = None, nstgid: str | None = None
) -> None:
    directory = proc / str(pid)
    directory.mkdir(parents=True, exist_ok=True)
    tgid = tgid or pid
    (directory / "status").write_text(status_text(pid, tgid, nstgid or str(tgid)))
    if cgroup is not None:
        (directory / "cgroup").write_text(cgroup)


def test_read_view_from_a_proc_directory(tmp_path):
    fake_process(tmp_path, 4242, f"0::/system.slice/docker-{ID}.scope\n", nstgid="4242\t1")
    fake_process(tmp_path, 4250, f"0::/system.slice/docker-{ID}.scope\n", 4242, "4242\t1")
    fake_process(tmp_path, 300, "0::/user.slice/user-1000.slice/session-2.scope\n")
    fake_process(tmp_path, 301, None)  # cgroup unreadable: the pids still count
    fake_process(tmp_path, 302, None, nstgid="302\t5")
    want = ProcessView(ID, 4242, 1)
    assert read_view(str(tmp_path), 4242) == want
    assert read_view(str(tmp_path), 4250) == want  # a thread: its process's view
    assert read_view(str(tmp_path), 300) == NO_VIEW
    assert read_view(str(tmp_path), 301) == NO_VIEW
    assert read_view(str(tmp_path), 302) == ProcessView(None, 302, 5)
    for gone in (999, 0, -1, 2**31):
        assert read_view(str(tmp_path), gone) is None
    (tmp_path / "303").mkdir()  # no status: not a process
    assert read_view(str(tmp_path), 303) is None


def test_reads_are_bounded_and_a_cut_line_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(process_view, "CGROUP_LIMIT", 100)
    filler = "".join(f"{n}:c{n}:/\n" for n in range(1, 12))  # 77 bytes
    cut = filler + f"0::/docker/{ID}abc\n"  # the limit cuts the id's segment after 23 bytes
    fake_process(tmp_path, 10, cut)
    assert read_view(str(tmp_path), 10) == NO_VIEW
    fake_process(tmp_path, 11, f"0::/docker/{ID}\n" + "5:x:/" + "a" * 500 + "\n")
    assert read_view(str(tmp_path), 11) == ProcessView(ID)


def test_views_are_kept_per_pid_and_read_again(tmp_path):
    views = ProcessViews(str(tmp_path), "node-1")
    fake_process(tmp_path, 10, f"0::/docker/{ID}\n")
    assert views.view(10, now=0.0) == ProcessView(ID)
    fake_process(tmp_path, 10, f"0::/docker/{ID2}\n")  # the pid reused by another container
    assert views.view(10, now=5.0) == ProcessView(ID)  # kept
    assert views.stats.read == 1
    assert views.view(10, now=process_view.REFRESH_SECONDS + 0.1) == ProcessView(ID2)
    fake_process(tmp_path, 10, "0::/\n")
    views.refresh(10)  # it wrote its resource
    assert views.view(10, now=process_view.REFRESH_SECONDS + 0.2) == NO_VIEW
    assert views.stats.read == 3 and views.stats.gone_pids == 0


def test_writers_gone_before_the_reader_looked_are_counted(tmp_path):
    views = ProcessViews(str(tmp_path), "node-1")
    for now in (0.0, 1.0, 2.0):
        assert views.view(77, now) == NO_VIEW
    assert views.view(78, 2.0) == NO_VIEW
    assert (views.stats.gone_pids, views.stats.gone_records, views.stats.read) == (2, 4, 2)
    assert views.view(77, 30.0) == NO_VIEW  # read again, still gone: the same pid
    assert (views.stats.gone_pids, views.stats.gone_records) == (2, 5)
    fake_process(tmp_path, 77, f"0::/docker/{ID}\n")
    views.refresh(77)
    assert views.view(77, 31.0) == ProcessView(ID)
    assert views.stats.gone_records == 5


def test_the_pid_table_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(process_view, "MAX_PIDS", 3)
    views = ProcessViews(str(tmp_path))
    for pid in range(1, 6):
        fake_process(tmp_path, pid, f"0::/docker/{ID}\n")
        views.view(pid, 0.0)
    assert len(views._views) == 3 and views.stats.forgotten == 2
    assert set(views._views) == {3, 4, 5}
    views.view(1, 0.0)  # forgotten: read again
    assert views.stats.read == 6 and set(views._views) == {4, 5, 1}


# --- the reader's own namespaces --------------------------------------------------------


def test_a_reader_in_the_hosts_namespaces_detects(tmp_path):
    views, notes = live_views(
        str(tmp_path), ReaderNamespaces(PROC_PID_INIT_INO, PROC_UTS_INIT_INO, True)
    )
    assert views is not None and notes == []
    assert views.host_name and views.proc == str(tmp_path)


@pytest.mark.parametrize(
    ("namespaces", "why"),
    [
        (ReaderNamespaces(4026532178, PROC_UTS_INIT_INO, True), "not in the host's pid"),
        (ReaderNamespaces(None, PROC_UTS_INIT_INO, True), "cannot tell its pid namespace"),
        (ReaderNamespaces(PROC_PID_INIT_INO, PROC_UTS_INIT_INO, False), "/proc shows another"),
    ],
)
def test_a_reader_outside_the_hosts_pid_namespace_does_not_detect(namespaces, why):
    views, notes = live_views("/proc", namespaces)
    assert views is None and len(notes) == 1
    assert why in notes[0] and "hostPID: true" in notes[0] and "--pid=host" in notes[0]
    assert notes[0].startswith(HOST_PID_NEEDED.split("{")[0])


def test_a_reader_with_its_containers_host_name_adds_none():
    views, notes = live_views("/proc", ReaderNamespaces(PROC_PID_INIT_INO, 4026532999, True))
    assert views is not None and views.host_name is None and notes == [HOST_UTS_NEEDED]


def test_reader_namespaces_here():
    here = ReaderNamespaces.here()
    assert here.pid == os.stat("/proc/self/ns/pid").st_ino
    assert here.uts == os.stat("/proc/self/ns/uts").st_ino


# --- the join_stage: one resource per resource id and view -------------------------------


SAME_APP = Resource({"service.name": "checkout", "process.pid": 1})
"""What one app in two containers announces: the same resource, the same resource id."""


def two_containers(tmp_path: Path) -> ProcessViews:
    fake_process(tmp_path, 5001, f"0::/system.slice/docker-{ID}.scope\n", nstgid="5001\t1")
    fake_process(tmp_path, 5002, f"0::/system.slice/docker-{ID2}.scope\n", nstgid="5002\t1")
    return ProcessViews(str(tmp_path), "node-1")


def app_records(pid: int, resource: Resource = SAME_APP) -> list[TraceRecord]:
    announced = resource_record(resource)
    rid = announced.values["resource_id"]
    spans = [span_record(s, rid)._replace(pid=pid) for s in make_spans(resource=resource)]
    logs = [log_record(r, rid)._replace(pid=pid) for r in make_logs(resource=resource)[:2]]
    return [announced._replace(pid=pid), *spans, *logs]


WANT = {
    5001: {"service.name": "checkout", "process.pid": 5001, "container.id": ID},
    5002: {"service.name": "checkout", "process.pid": 5002, "container.id": ID2},
}
for _want in WANT.values():
    _want.update({"host.name": "node-1", "process.vpid": 1})


def test_same_resource_id_from_two_containers_gives_two_resources(tmp_path):
    join_stage = SdkRebuilder(process_views=two_containers(tmp_path))
    first, second = app_records(5001), app_records(5002)
    assert first[0].values["resource_id"] == second[0].values["resource_id"]
    items = join_stage.add(first + second)
    assert len(items) == 2 * (len(first) - 1)
    by_pid = {5001: items[: len(items) // 2], 5002: items[len(items) // 2 :]}
    for pid, rebuilt in by_pid.items():
        resources = {id(item.resource) for item in rebuilt}
        assert len(resources) == 1  # one object per resource id and view
        assert dict(rebuilt[0].resource.attributes) == WANT[pid]
    assert join_stage.stats.resources == 1
    # the OTLP encoder groups by resource: two resourceSpans
    spans = [s for s in items if not hasattr(s, "log_record")]
    request = otlp_json.spans_request(spans)
    assert len(request["resourceSpans"]) == 2


def test_same_resource_id_from_two_containers_in_otlp_json_direct(tmp_path):
    records = app_records(5001) + app_records(5002)
    join_stage = JoinStage(process_views=two_containers(tmp_path))
    items = join_stage.add(records)
    assert all(type(item) is JoinedRecord for item in items)
    out = io.StringIO()
    output = OtlpJsonOutput(out)
    output.write(items)
    spans_line, logs_line = (json.loads(line) for line in out.getvalue().splitlines())
    for line, key in ((spans_line, "resourceSpans"), (logs_line, "resourceLogs")):
        assert len(line[key]) == 2
        got = [
            {a["key"]: next(iter(a["value"].values())) for a in group["resource"]["attributes"]}
            for group in line[key]
        ]
        for attributes, pid in zip(got, (5001, 5002), strict=True):
            assert attributes == {k: str(v) if k.startswith("process.") else v
                                  for k, v in WANT[pid].items()}  # fmt: skip
    # the direct line equals the encoder's of the SDK objects, view for view
    sdk = SdkRebuilder(process_views=two_containers(tmp_path)).add(records)
    spans = [s for s in sdk if not hasattr(s, "log_record")]
    want = otlp_json.dumps(otlp_json.spans_request(spans))
    joined_spans = [i for i in items if type(i.checked).__name__ == "CheckedSpan"]
    assert otlp_json_direct.spans_line(joined_spans)[0] == want


def test_records_waiting_for_their_resource_keep_their_writers_view(tmp_path):
    join_stage = JoinStage(process_views=two_containers(tmp_path))
    first, second = app_records(5001), app_records(5002)
    items = join_stage.add(first[1:] + second[1:])  # the resource not yet announced
    assert items == [] and join_stage.pending == 2 * (len(first) - 1)
    items = join_stage.add([first[0]])
    assert {item.resource.attributes["container.id"] for item in items} == {ID, ID2}
    # never announced: the empty resource, with what the host sees
    join_stage = JoinStage(process_views=two_containers(tmp_path))
    join_stage.add(first[1:3])
    released = join_stage.flush()
    assert [dict(item.resource.attributes) for item in released] == [
        {"container.id": ID, "host.name": "node-1"}
    ] * 2
    assert join_stage.stats.without_resource == 2


def test_a_resource_record_makes_its_writers_view_read_again(tmp_path):
    views = two_containers(tmp_path)
    join_stage = JoinStage(process_views=views)
    join_stage.add(app_records(5001))
    fake_process(tmp_path, 5001, "0::/\n")  # exited; a host process got its pid
    again = app_records(5001, Resource({"service.name": "other", "process.pid": 5001}))
    items = join_stage.add(again)
    assert dict(items[0].resource.attributes) == {
        "service.name": "other",
        "process.pid": 5001,
        "host.name": "node-1",
    }


def test_a_rebuilder_without_views_is_unchanged(tmp_path):
    records = app_records(5001) + app_records(5002)
    plain = JoinStage().add(records)
    for item in plain:
        assert dict(item.resource.attributes) == dict(SAME_APP.attributes)
    assert len({id(item.resource) for item in plain}) == 1
    direct = JoinStage().add(records)
    out = io.StringIO()
    OtlpJsonOutput(out).write(direct)
    assert [len(json.loads(line)[key]) for line, key in
            zip(out.getvalue().splitlines(), ("resourceSpans", "resourceLogs"), strict=True)
            ] == [1, 1]  # fmt: skip


def test_views_of_host_processes_share_one_resource(tmp_path):
    fake_process(tmp_path, 6001, "0::/user.slice/user-1000.slice/session-2.scope\n")
    fake_process(tmp_path, 6002, "0::/system.slice/app.service\n")
    join_stage = JoinStage(process_views=ProcessViews(str(tmp_path), "node-1"))
    items = join_stage.add(app_records(6001) + app_records(6002))
    assert len({id(item.resource) for item in items}) == 1
    assert dict(items[0].resource.attributes) == {**SAME_APP.attributes, "host.name": "node-1"}


# --- the record command: on by default, off with the flag, gone writers in the summary ---


@pytest.fixture(autouse=True)
def _python_core(monkeypatch):
    """The fake reader hands its records through ``decode_page``: the Python path's (the
    native core decodes real pages)."""
    monkeypatch.setattr(common, "_CORE", CoreChoice(None, "python (the fake reader's pages)"))


class _FakeReader:
    def __init__(self, records: list[TraceRecord]) -> None:
        self.records = records
        self.filter_rejected: dict[str, str] = {}
        self.incompatible: dict[str, str] = {}
        self.announcement_error = None
        self.instance = "fake"
        self.cleanup_error = None
        self.decoder = SimpleNamespace(stats=DecoderStats(), decode_page=self._decode_page)
        self.lost = 0
        self.first_loss = self.last_loss = None
        self.found_later_not_remembered = 0
        self.announcements = None

    def start(self) -> None:
        pass

    def read_cpu_pages(self) -> list[tuple[int, bytes]]:
        """One page standing for the records (:meth:`_decode_page` gives them)."""
        return [(0, b"")] if self.records else []

    def _decode_page(self, page: bytes, out: list[TraceRecord]) -> None:
        out += self.records
        self.records = []

    def known_formats(self) -> list[str]:
        return []

    def discover(self) -> None:
        pass

    def wait(self, seconds: float) -> None:
        pass

    def close(self) -> None:
        pass

    def late_services(self) -> list[object]:
        return []

    def late_providers(self) -> list[object]:
        return []

    @property
    def providers(self) -> ProviderDiscovery:
        return ProviderDiscovery(())


def run_record(monkeypatch, tmp_path: Path, flags: list[str], records: list[TraceRecord]):
    args = parser().parse_args(["record", "--duration", "0.01", *flags])
    monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
    monkeypatch.setattr(record_command, "TraceReader", lambda *a, **k: _FakeReader(records))
    monkeypatch.setattr(
        record_command, "live_views", lambda: (ProcessViews(str(tmp_path), "node-1"), [])
    )
    out, err = io.StringIO(), io.StringIO()
    assert record_command.record(args, out, err) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    resources = [
        {a["key"]: next(iter(a["value"].values())) for a in group["resource"]["attributes"]}
        for line in lines
        for key in ("resourceSpans", "resourceLogs")
        for group in line.get(key, [])
    ]
    return resources, err.getvalue()


def test_record_adds_what_the_host_sees_by_default(monkeypatch, tmp_path):
    two_containers(tmp_path)
    resources, err = run_record(monkeypatch, tmp_path, [], app_records(5001) + app_records(77))
    assert {"service.name": "checkout", "process.pid": "5001", "container.id": ID,
            "host.name": "node-1", "process.vpid": "1"} in resources  # fmt: skip
    assert {"service.name": "checkout", "process.pid": "1", "host.name": "node-1"} in resources
    gone = len(app_records(77)) - 1
    assert (
        f"{gone} records of 1 writer pids gone before the reader looked them up in /proc "
        "(no container.id, no host process.pid)"
    ) in err


def test_record_with_no_resource_detection_adds_nothing(monkeypatch, tmp_path):
    two_containers(tmp_path)
    resources, err = run_record(
        monkeypatch, tmp_path, ["--no-resource-detection"], app_records(5001)
    )
    assert resources == [{"service.name": "checkout", "process.pid": "1"}] * 2
    assert "gone before" not in err


def test_record_says_why_it_adds_nothing_outside_the_hosts_pid_namespace(monkeypatch, tmp_path):
    args = parser().parse_args(["record", "--duration", "0.01"])
    monkeypatch.setattr(record_command, "tracefs_of", lambda args: None)
    monkeypatch.setattr(
        record_command, "TraceReader", lambda *a, **k: _FakeReader(app_records(5001))
    )
    namespaces = ReaderNamespaces(4026532178, PROC_UTS_INIT_INO, True)
    monkeypatch.setattr(record_command, "live_views", lambda: live_views("/proc", namespaces))
    out, err = io.StringIO(), io.StringIO()
    assert record_command.record(args, out, err) == 0
    assert err.getvalue().count("hostPID: true") == 1
    assert "container.id" not in out.getvalue()


def test_the_summary_counts_writers_gone_and_views_forgotten():
    views = ProcessViews("/nonexistent")
    views.stats.gone_pids, views.stats.gone_records, views.stats.forgotten = 2, 9, 3
    join_stage = JoinStage(process_views=views)
    parts = rebuilt_parts(join_stage, DecoderStats(), SimpleNamespace(failed=0))
    assert (
        "9 records of 2 writer pids gone before the reader looked them up in /proc "
        "(no container.id, no host process.pid)" in parts
    )
    assert "3 writer pids looked up again: too many writers" in parts
    assert not any(
        "gone" in p for p in rebuilt_parts(JoinStage(), DecoderStats(), SimpleNamespace(failed=0))
    )


def test_decode_has_no_detection_flag_and_says_why():
    with pytest.raises(SystemExit):
        parser().parse_args(["decode", "x.dat", "--no-resource-detection"])
    assert parser().parse_args(["record"]).no_resource_detection is False
    assert parser().parse_args(["record", "--no-resource-detection"]).no_resource_detection


def test_a_host_without_a_name_adds_none(tmp_path, monkeypatch):
    """The kernel's node name until one is set is ``(none)``: not a name to add."""
    monkeypatch.setattr(process_view.socket, "gethostname", lambda: "(none)")
    views, _ = live_views(
        str(tmp_path), ReaderNamespaces(PROC_PID_INIT_INO, PROC_UTS_INIT_INO, True)
    )
    assert views is not None and views.host_name is None
