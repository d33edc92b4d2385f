# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""An announced prefix's tracepoints are looked up by name (a fake tracefs with thousands
of other names), never by a listing of every user_events name."""

from __future__ import annotations

from pathlib import Path

from opentelemetry_exporter_userevents.abi.tracefs import Tracefs
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder
from opentelemetry_exporter_userevents.reader.live import (
    announced_tracepoints as announced_tracepoints_module,
)
from opentelemetry_exporter_userevents.reader.live.announced_tracepoints import (
    MULTI_PROBE_IDS,
    announced_tracepoints,
    highest_multi_id,
)
from opentelemetry_exporter_userevents.reader.live.trace_reader import TraceReader
from opentelemetry_exporter_userevents.record.schema import SPAN
from opentelemetry_exporter_userevents.record.tracepoints import single_format_name

OTHERS = 3000


class CountingTracefs(Tracefs):
    """A directory tree as tracefs; counts listings of a system's events."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.listings = 0
        self.next_id = 0

    def events(self, system: str) -> list[str]:
        self.listings += 1
        return super().events(system)

    def add(self, system: str, name: str) -> None:
        directory = Path(self.path) / "events" / system / name
        directory.mkdir(parents=True)
        self.next_id += 1
        (directory / "id").write_text(f"{self.next_id}\n")

    def add_multi(self, base: str, multi_id: int) -> str:
        name = f"{base}.{multi_id:x}"
        self.add(USER_EVENTS_MULTI_SYSTEM, name)
        return name


def host(tmp_path: Path) -> CountingTracefs:
    tracefs = CountingTracefs(str(tmp_path))
    for n in range(OTHERS):  # another program's tracepoints, the ids it was given
        tracefs.add_multi(f"other_{n}", n)
    tracefs.listings = 0
    return tracefs


def test_the_highest_multi_format_id_of_a_listing():
    assert highest_multi_id(["a.1f", "b.3", "c_span_1a2b3c4d", "d"]) == 0x1F
    assert highest_multi_id(["c_span_1a2b3c4d"]) == -1


def test_an_announced_prefix_is_found_by_name_in_both_layouts_without_a_listing(tmp_path):
    tracefs = host(tmp_path)
    decoder = RecordDecoder("*")
    single = single_format_name("svc_span", SPAN)
    tracefs.add(USER_EVENTS_SYSTEM, single)
    tracefs.add(USER_EVENTS_SYSTEM, "svc_resource")  # a release before versioned names
    new = [tracefs.add_multi("svc_span", OTHERS + 2), tracefs.add_multi("svc_log_info", OTHERS)]
    too_far = tracefs.add_multi("svc_log_warn", OTHERS + MULTI_PROBE_IDS)
    tracefs.add_multi("other_svc_span", OTHERS + 1)  # another prefix, in the window

    found = announced_tracepoints(tracefs, decoder, ["svc"], OTHERS)
    assert tracefs.listings == 0
    assert sorted(found) == sorted(
        [
            (USER_EVENTS_SYSTEM, single, "span"),
            (USER_EVENTS_SYSTEM, "svc_resource", "resource"),
            (USER_EVENTS_MULTI_SYSTEM, new[0], "span"),
            (USER_EVENTS_MULTI_SYSTEM, new[1], "log"),
        ]
    )
    assert too_far not in {name for _, name, _ in found}  # the next full rescan finds it


def test_a_reader_rescans_an_announced_prefix_by_name_and_probes_after_its_last_full_rescan(
    tmp_path,
):
    tracefs = host(tmp_path)
    reader = TraceReader(tracefs, prefix="*", hold=False)
    enabled: list[str] = []
    reader._enable = lambda system, name, kind: enabled.append(name) or True  # type: ignore[method-assign]
    reader.scan()  # the full rescan: lists once per system, learns the highest id
    assert tracefs.listings == 2 and enabled == []
    tracefs.add_multi("svc_span", OTHERS + 3)
    tracefs.add_multi("svc_resource", OTHERS + 4)
    reader.scan({"svc"})
    assert enabled == [f"svc_resource.{OTHERS + 4:x}", f"svc_span.{OTHERS + 3:x}"]  # resource first
    for _ in range(50):  # a flood of announcements of one prefix: no listing, ever
        reader.scan({"svc"})
    assert tracefs.listings == 2


def test_one_announced_prefix_costs_at_most_its_documented_number_of_stats(tmp_path, monkeypatch):
    tracefs = host(tmp_path)
    looked: list[str] = []
    monkeypatch.setattr(announced_tracepoints_module.os.path, "isdir", looked.append)
    hostile = "a" * 200  # the longest prefix an announcement may name
    announced_tracepoints(tracefs, RecordDecoder("*"), [hostile], 2**63)
    assert 0 < len(looked) <= 12 * (2 + MULTI_PROBE_IDS)
