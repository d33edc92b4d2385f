# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""One grouping by resource and scope for both direct encoders: the encoder's order (the
first record that could be encoded first), records it cannot carry left out and counted,
a worker's encoded items grouped as checked records are; the cache of encoded resources
and scopes bounded whatever the resources."""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents.reader.decode.checked_records import CheckedScope
from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord, JoinStage
from opentelemetry_exporter_userevents.reader.outputs.exporters import (
    grouping,
    otlp_json_direct,
    otlp_proto_direct,
)
from opentelemetry_exporter_userevents.reader.outputs.exporters.grouping import (
    EncodedCache,
    Unrepresentable,
    grouped,
)
from tests.reader.outputs.test_otlp_proto_direct import _log, _span

A, B = Resource({"service.name": "a"}), Resource({"service.name": "b"})
A_AGAIN = Resource({"service.name": "a"})  # another object, the same value
SCOPE = JoinStage().scope("s", CheckedScope("lib", "1", None, {}))


def _encode(record: tuple[str]) -> str:
    """The record's name; a name starting "bad" cannot be encoded. (Records here are
    1-tuples: the compiled build checks that a joined record's ``checked`` is a tuple.)"""
    (name,) = record
    if name.startswith("bad"):
        raise Unrepresentable(name)
    return name


def test_groups_come_in_the_order_of_their_first_record_encoded():
    records = [
        JoinedRecord(("bad a",), A, SCOPE),  # type: ignore[arg-type]
        JoinedRecord(("b1",), B, SCOPE),  # type: ignore[arg-type]
        JoinedRecord(("a1",), A_AGAIN, SCOPE),  # type: ignore[arg-type]
        JoinedRecord(("a2",), A, None),  # type: ignore[arg-type]
        JoinedRecord(("b2",), B, SCOPE),  # type: ignore[arg-type]
    ]
    groups, failed = grouped(records, _encode, repr, repr, EncodedCache[str]())
    assert failed == 1
    assert [g.first for g in groups] == [B, A]  # A's first record could not be encoded
    assert groups[1].first is A  # the first object of its value seen
    assert [[s.items for s in g.used] for g in groups] == [[["b1", "b2"]], [["a1"], ["a2"]]]


def test_a_resource_that_cannot_be_encoded_fails_its_records_only():
    def resource(item: Resource) -> str:
        if item is B:
            raise Unrepresentable("b")
        return "r"

    records = [JoinedRecord((n,), r, None) for n, r in (("1", A), ("2", B), ("3", A))]  # type: ignore[arg-type]
    groups, failed = grouped(records, _encode, resource, repr, EncodedCache[str]())
    assert failed == 1 and [s.items for s in groups[0].used] == [["1", "3"]]


def test_the_encoded_cache_is_bounded_whatever_the_resources(monkeypatch):
    monkeypatch.setattr(grouping, "CACHE", 16)
    cache = EncodedCache[str]()
    made: list[int] = []

    def encode(item: Resource) -> str:
        made.append(1)
        return str(item.attributes["n"])

    for n in range(100):  # a hostile writer: a new resource each time
        assert cache.get(Resource({"n": n}), encode) == str(n)
        assert len(cache._items) <= 16
    assert len(made) == 100


def test_a_workers_items_are_grouped_as_checked_records_are():
    checked = [_span(), _span(span_id=3), _log(), _log(span_id=4)]
    direct = [JoinedRecord(c, A, SCOPE) for c in checked]
    kinds = ("span", "span", "log", "log")
    items = [otlp_json_direct.span_item(c) for c in checked[:2]]
    items += [otlp_json_direct.log_item(c) for c in checked[2:]]
    encoded = [
        JoinedRecord(EncodedRecord(0, 1, "t", kind, 1, 0, "s", None, item), A, SCOPE)
        for kind, item in zip(kinds, items, strict=True)
    ]
    assert otlp_json_direct.spans_line(encoded[:2]) == otlp_json_direct.spans_line(direct[:2])
    assert otlp_json_direct.logs_line(encoded[2:]) == otlp_json_direct.logs_line(direct[2:])
    assert all(joined.is_span for joined in encoded[:2] + direct[:2])
    assert not any(joined.is_span for joined in encoded[2:] + direct[2:])
    # None: OTLP cannot carry it; counted as the checked record would be
    unrepresentable = encoded[0]._replace(checked=encoded[0].checked._replace(item=None))
    assert otlp_json_direct.spans_line([unrepresentable, encoded[1]])[1] == 1
    # protobuf cannot take a JSON item: left out and counted, never sent as something else
    assert otlp_proto_direct.spans_request(encoded[:2]) == (None, 2)
    assert otlp_proto_direct.logs_request(direct[:2] + encoded[2:]) == (None, 4)
