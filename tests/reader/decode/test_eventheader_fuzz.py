# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The EventHeader decoder under hypothesis: events built by the test's own encoder from
random field descriptors (every encoding, arrays, nested structs, both byte orders, tags,
attributes, activity ids, unknown extensions) decode to the values put in; and random or
damaged metadata, payloads, headers and names raise only :class:`EventHeaderError`, with a
reason of its vocabulary, while what does decode stays within the bounds."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opentelemetry_exporter_userevents.reader.decode.eventheader import decode_event
from opentelemetry_exporter_userevents.reader.decode.eventheader_name import (
    parse_tracepoint_name,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    MAX_STRUCT_DEPTH,
    MAX_VALUES,
    REASONS,
    EventField,
    EventHeaderError,
    EventHeaderEvent,
)
from tests.reader.decode.eventheader_encoder import E, F, Spec, event, metadata, payload

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))

_TEXT = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=12)
_LATIN1 = st.text(st.characters(max_codepoint=255, blacklist_characters="\0"), max_size=12)
_NAME = st.text(st.characters(blacklist_characters="\0;", blacklist_categories=("Cs",)), max_size=8)
_ATTRIBUTES = st.lists(
    st.tuples(
        st.text(
            st.characters(blacklist_characters="\0;=", blacklist_categories=("Cs",)), max_size=4
        ),
        st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=6),
    ),
    max_size=2,
).map(tuple)


def _ints(bits: int, signed: bool) -> st.SearchStrategy[int]:
    low = -(1 << (bits - 1)) if signed else 0
    return st.integers(low, (1 << (bits - 1 if signed else bits)) - 1)


def _sized_ints(signed: bool) -> st.SearchStrategy[int]:
    return st.one_of(*(_ints(bits, signed) for bits in (8, 16, 32, 64)))


_SCALARS: list[tuple[E, int, st.SearchStrategy[Any]]] = [
    *((E.VALUE8, fmt, _ints(8, False)) for fmt in (F.DEFAULT, F.UNSIGNED_INT, F.HEX_INT)),
    (E.VALUE8, F.SIGNED_INT, _ints(8, True)),
    (E.VALUE8, F.BOOLEAN, st.booleans()),
    (E.VALUE8, F.STRING8, st.characters(max_codepoint=255)),
    (E.VALUE8, F.HEX_BYTES, st.binary(min_size=1, max_size=1)),
    *((E.VALUE16, fmt, _ints(16, False)) for fmt in (F.UNSIGNED_INT, F.HEX_INT, F.PORT)),
    (E.VALUE16, F.SIGNED_INT, _ints(16, True)),
    (E.VALUE16, F.BOOLEAN, st.booleans()),
    (E.VALUE16, F.STRING_UTF, st.integers(0, 0xFFFF).map(chr)),
    (E.VALUE32, F.DEFAULT, _ints(32, False)),
    (E.VALUE32, F.HEX_INT, _ints(32, False)),
    *((E.VALUE32, fmt, _ints(32, True)) for fmt in (F.SIGNED_INT, F.PID, F.ERRNO, F.TIME)),
    (E.VALUE32, F.BOOLEAN, st.booleans()),
    (E.VALUE32, F.FLOAT, st.floats(width=32, allow_nan=False)),
    (E.VALUE32, F.STRING_UTF, st.integers(0, 0x10FFFF).map(chr)),
    (E.VALUE32, F.IP_ADDRESS, st.integers(0, 2**32 - 1).map(IPv4Address)),
    (E.VALUE32, F.HEX_BYTES, st.binary(min_size=4, max_size=4)),
    (E.VALUE64, F.UNSIGNED_INT, _ints(64, False)),
    (E.VALUE64, F.HEX_INT, _ints(64, False)),
    (E.VALUE64, F.SIGNED_INT, _ints(64, True)),
    (E.VALUE64, F.TIME, _ints(64, True)),
    (E.VALUE64, F.FLOAT, st.floats(allow_nan=False)),
    (E.VALUE128, F.DEFAULT, st.binary(min_size=16, max_size=16)),
    (E.VALUE128, F.UUID, st.uuids()),
    (E.VALUE128, F.IP_ADDRESS, st.integers(0, 2**128 - 1).map(IPv6Address)),
    (E.ZSTRING_CHAR8, F.DEFAULT, _TEXT),
    (E.ZSTRING_CHAR8, F.STRING8, _LATIN1),
    (E.ZSTRING_CHAR16, F.STRING_UTF, _TEXT),
    (E.ZSTRING_CHAR32, F.DEFAULT, _TEXT),
    (E.STRING_LENGTH16_CHAR8, F.DEFAULT, st.text(max_size=12)),
    (E.STRING_LENGTH16_CHAR8, F.STRING8, st.text(st.characters(max_codepoint=255))),
    (E.STRING_LENGTH16_CHAR8, F.SIGNED_INT, _sized_ints(True)),
    (E.STRING_LENGTH16_CHAR8, F.UNSIGNED_INT, st.none() | _sized_ints(False)),
    (E.STRING_LENGTH16_CHAR16, F.DEFAULT, st.text(max_size=12)),
    (E.STRING_LENGTH16_CHAR32, F.STRING_UTF, st.text(max_size=12)),
    (E.BINARY_LENGTH16_CHAR8, F.DEFAULT, st.binary(max_size=12)),
    (E.BINARY_LENGTH16_CHAR8, F.HEX_INT, _sized_ints(False)),
]


@st.composite
def _scalar_spec(draw: st.DrawFn) -> Spec:
    encoding, fmt, values = draw(st.sampled_from(_SCALARS))
    array = draw(st.sampled_from(["", "c", "v"]))
    if array:
        size = draw(st.integers(1 if array == "c" else 0, 3))
        value: Any = [draw(values) for _ in range(size)]
    else:
        value = draw(values)
    return Spec(
        draw(_NAME), encoding, fmt, draw(_tag()), array, value, attributes=draw(_ATTRIBUTES)
    )


def _tag() -> st.SearchStrategy[int]:
    return st.sampled_from([0, 0, 1, 0xBEEF])


@st.composite
def _struct_spec(draw: st.DrawFn, children: st.SearchStrategy[Spec]) -> Spec:
    members = draw(st.lists(children, min_size=1, max_size=3))
    array = draw(st.sampled_from(["", "c", "v"]))
    value: Any = [member.value for member in members]
    if array:  # each element repeats the members' values
        value = [value] * draw(st.integers(1 if array == "c" else 0, 2))
    return Spec(draw(_NAME), E.STRUCT, 0, draw(_tag()), array, value, members)


_SPECS = st.recursive(_scalar_spec(), lambda inner: _struct_spec(inner), max_leaves=10)


def _expected(spec: Spec, value: Any) -> Any:
    """What decoding ``spec`` holding ``value`` must give: (name, attributes, tag, value)."""
    shown = [_shown(spec, element) for element in value] if spec.array else _shown(spec, value)
    return (spec.name, spec.attributes, spec.tag, shown)


def _shown(spec: Spec, value: Any) -> Any:
    if spec.encoding == E.STRUCT:
        return [
            _expected(child, member) for child, member in zip(spec.children, value, strict=True)
        ]
    return value


def _decoded(field: EventField) -> Any:
    def one(value: Any) -> Any:
        return [_decoded(member) for member in value] if isinstance(value, tuple) else value

    assert isinstance(field.value, list) == field.array
    values = field.value if isinstance(field.value, list) else [field.value]
    shown = [one(element) for element in values] if field.array else one(values[0])
    return (field.name, field.attributes, field.tag, shown)


@SETTINGS
@given(
    specs=st.lists(_SPECS, max_size=5),
    big=st.booleans(),
    name=_NAME,
    attributes=_ATTRIBUTES,
    level=st.integers(1, 255),
    keyword=st.integers(0, 2**64 - 1),
    header=st.tuples(*(st.integers(0, top) for top in (255, 0xFFFF, 0xFFFF, 255))),
    activity=st.none() | st.binary(min_size=16, max_size=16) | st.binary(min_size=32, max_size=32),
    extra=st.lists(st.tuples(st.integers(3, 0x7FFF), st.binary(max_size=8)), max_size=2),
    padding=st.binary(max_size=7),
)
def test_encoded_events_decode_to_the_values_put_in(
    specs: list[Spec],
    big: bool,
    name: str,
    attributes: Any,
    level: int,
    keyword: int,
    header: tuple[int, int, int, int],
    activity: bytes | None,
    extra: list[tuple[int, bytes]],
    padding: bytes,
) -> None:
    meta = metadata(name, specs, big, attributes)
    data = event(meta, payload(specs, big) + padding, big, level, activity, header, tuple(extra))
    decoded = decode_event(f"My_Provider_L{level:x}K{keyword:x}Gmygroup", data)
    assert (decoded.provider, decoded.keyword, decoded.tracepoint.group) == (
        "My_Provider",
        keyword,
        "mygroup",
    )
    assert (decoded.name, decoded.attributes, decoded.level, decoded.big_endian) == (
        name,
        attributes,
        level,
        big,
    )
    assert (decoded.version, decoded.id, decoded.tag, decoded.opcode) == header
    assert decoded.activity_id == (activity[:16] if activity else None)
    assert decoded.related_activity_id == (
        activity[16:] if activity and len(activity) == 32 else None
    )
    assert [_decoded(field) for field in decoded.fields] == [_expected(s, s.value) for s in specs]
    for field, spec in zip(decoded.fields, specs, strict=True):
        assert field.encoding == spec.encoding
        assert field.format == (len(spec.children) if spec.encoding == E.STRUCT else spec.format)


def _check_bounds(decoded: EventHeaderEvent) -> None:
    count = 0

    def walk(fields: tuple[EventField, ...], depth: int) -> None:
        nonlocal count
        assert depth <= MAX_STRUCT_DEPTH
        for field in fields:
            count += 1
            values = field.value if isinstance(field.value, list) else [field.value]
            count += len(values) if field.array else 0
            for value in values:
                if isinstance(value, tuple):
                    walk(value, depth + 1)

    walk(decoded.fields, 0)
    assert count <= MAX_VALUES


def _decode_or_reason(name: str, data: bytes) -> None:
    try:
        decoded = decode_event(name, data)
    except EventHeaderError as error:
        assert error.reason in REASONS
        return
    _check_bounds(decoded)


@SETTINGS
@given(meta=st.binary(max_size=200), body=st.binary(max_size=200), big=st.booleans())
def test_random_metadata_and_payloads_give_only_the_typed_error(
    meta: bytes, body: bytes, big: bool
) -> None:
    _decode_or_reason("P_L4K1", event(b"ev\0" + meta, body, big))
    _decode_or_reason("P_L4K1", event(meta, body, big))


@SETTINGS
@given(
    specs=st.lists(_SPECS, min_size=1, max_size=4),
    big=st.booleans(),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255), st.integers(0, 2))),
)
def test_damaged_events_give_only_the_typed_error(
    specs: list[Spec], big: bool, edits: list[tuple[int, int, int]]
) -> None:
    data = bytearray(event(metadata("ev", specs, big), payload(specs, big), big))
    for at, byte, how in edits:  # overwrite, insert or delete a byte
        at %= len(data) + 1
        if how == 0 and at < len(data):
            data[at] = byte
        elif how == 1:
            data.insert(at, byte)
        elif at < len(data):
            del data[at]
    _decode_or_reason("P_L4K1", bytes(data))


@SETTINGS
@given(data=st.binary(max_size=64), name=st.text(max_size=40))
def test_random_records_and_names_give_only_the_typed_error(data: bytes, name: str) -> None:
    _decode_or_reason(name, data)
    try:
        parsed = parse_tracepoint_name(name)
    except EventHeaderError as error:
        assert error.reason in REASONS
    else:
        assert name.startswith(parsed.provider + "_L")
        assert 0 <= parsed.level <= 255 and 0 <= parsed.keyword < 2**64
