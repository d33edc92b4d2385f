# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Spans or logs grouped by resource, then scope, as the OTLP encoder groups the SDK
objects it encodes: one grouping for both direct encoders (:mod:`.otlp_json_direct` and
:mod:`.otlp_proto_direct`), each giving its own way to encode a record, a resource and a
scope.

The encoder keeps a dict of resources, each a dict of scopes, keyed by the objects' own
equality, entered as each record is encoded; a request with a record it cannot encode
fails whole, and the OTLP/JSON output (:func:`.otlp_json.skipping_unrepresentable`) and
the tests encode the others again. So groups come in the order of their first record that
could be encoded, each holding the first object of its value seen; a record whose
resource, scope or own values OTLP cannot carry is left out and counted. The join_stage
keeps one object per distinct resource and scope, so each object is looked up by value
once per request (by identity after that), and its encoded form is made once, kept across
requests in an :class:`EncodedCache`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from opentelemetry_exporter_userevents.reader.join.joined_record import JoinedRecord

CACHE = 4096
"""Encoded resources and scopes kept by an :class:`EncodedCache`; past it, it starts again
(each is encoded again when next seen: nothing is lost)."""

E = TypeVar("E")
"""A resource's or scope's encoded form."""
I = TypeVar("I")  # noqa: E741 - the item type, beside E
"""A record's encoded form."""


class Unrepresentable(ValueError):
    """A value OTLP cannot carry: an integer beyond 64 bits, a lone surrogate."""


class EncodedCache(Generic[E]):
    """The encoded form of each Resource and InstrumentationScope object (by identity:
    the join_stage keeps one per distinct value), or None where OTLP cannot carry it; one
    per output and encoding (JSON text, protobuf bytes)."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[object, E | None]] = {}

    def get(self, item: Any, encode: Callable[[Any], E]) -> E | None:
        try:
            return self._items[id(item)][1]
        except KeyError:
            pass
        encoded: E | None
        try:
            encoded = encode(item)
        except Unrepresentable:
            encoded = None
        if len(self._items) >= CACHE:
            self._items.clear()
        self._items[id(item)] = (item, encoded)  # the item kept: its id is not reused
        return encoded


class Group(Generic[E, I]):
    """Records of equal resources (or, in a resource's group, of equal scopes): the first
    object seen and its encoded form; a resource's scope groups with records, in the order
    of their first record; a scope's encoded records."""

    __slots__ = ("encoded", "first", "items", "scopes", "used")

    def __init__(self, first: Any, encoded: E | None) -> None:
        self.first = first
        self.encoded = encoded
        self.items: list[I] = []
        self.scopes: dict[Any, Group[E, I]] = {}
        self.used: list[Group[E, I]] = []


def grouped(
    records: Iterable[JoinedRecord],
    encode: Callable[[Any], I],
    encode_resource: Callable[[Resource], E],
    encode_scope: Callable[[InstrumentationScope | None], E],
    cache: EncodedCache[E],
) -> tuple[list[Group[E, I]], int]:
    """The resource groups of ``records`` that hold any (each one's :attr:`Group.used`
    scope groups hold them), in the order the encoder makes; and how many records were
    left out (``encode`` raised :class:`Unrepresentable`, or their resource or scope has
    no encoded form)."""
    resources: dict[Any, Group[E, I]] = {}
    used: list[Group[E, I]] = []
    resource_by_id: dict[int, Group[E, I]] = {}
    scope_by_id: dict[tuple[int, int], Group[E, I]] = {}
    keep: list[Any] = []  # the objects looked up by id, alive while the ids are used
    failed = 0
    for checked, resource, scope in records:
        resource_of = resource_by_id.get(id(resource))
        if resource_of is None:
            resource_of = resources.get(resource)
            if resource_of is None:
                encoded = cache.get(resource, encode_resource)
                resource_of = resources[resource] = Group(resource, encoded)
            resource_by_id[id(resource)] = resource_of
            keep.append(resource)
        key = (id(resource_of), id(scope))
        scope_of = scope_by_id.get(key)
        if scope_of is None:
            scope_of = resource_of.scopes.get(scope)
            if scope_of is None:
                scope_of = resource_of.scopes[scope] = Group(scope, cache.get(scope, encode_scope))
            scope_by_id[key] = scope_of
            keep.append(scope)
        if resource_of.encoded is None or scope_of.encoded is None:
            failed += 1
            continue
        try:
            item = encode(checked)
        except Unrepresentable:
            failed += 1
            continue
        if not scope_of.items:
            if not resource_of.used:
                used.append(resource_of)
            resource_of.used.append(scope_of)
        scope_of.items.append(item)
    return used, failed
