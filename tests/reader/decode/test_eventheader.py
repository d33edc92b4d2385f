# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The EventHeader decoder case by case: tracepoint names, each reason of its error
vocabulary from the record that earns it, its bounds at and past their limits, and the
formats whose reading is easy to get wrong (byte order marks, lenient text, null, booleans
that are not 0 or 1, ports and addresses in network order)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from ipaddress import IPv4Address

import pytest

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.reader.decode import eventheader_types as t
from opentelemetry_exporter_userevents.reader.decode.eventheader import (
    decode_event,
    decode_record,
    eventheader_offset,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_name import (
    is_eventheader_name,
    parse_tracepoint_name,
)
from opentelemetry_exporter_userevents.reader.decode.eventheader_types import (
    EventHeaderError,
    TracepointName,
)
from tests.reader.decode.eventheader_encoder import E, F, Spec, event, metadata, payload

NAME = "P_L4K1"


def _reason(data: bytes, name: str = NAME) -> str:
    with pytest.raises(EventHeaderError) as caught:
        decode_event(name, data)
    assert caught.value.reason in t.REASONS
    return caught.value.reason


def _one(encoding: E, fmt: int, raw: bytes, big: bool = False) -> object:
    """The value of a one-field event whose payload is ``raw``."""
    meta = metadata("ev", [Spec("f", encoding, fmt)], big)
    return decode_event(NAME, event(meta, raw, big)).fields[0].value


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("MyProvider_L3K2a", TracepointName("MyProvider", 3, 0x2A, "")),
        ("Other_Provider_L5K0Gperf", TracepointName("Other_Provider", 5, 0, "Gperf")),
        ("P_Lff" + "Kffffffffffffffff" + "AbGx1", TracepointName("P", 255, 2**64 - 1, "AbGx1")),
    ],
)
def test_tracepoint_names_parse_into_their_parts(name: str, parsed: TracepointName) -> None:
    assert parse_tracepoint_name(name) == parsed
    assert is_eventheader_name(name)


def test_the_group_is_the_g_option() -> None:
    assert parse_tracepoint_name("P_L1K0AxGmsftZ1").group == "msft"
    assert parse_tracepoint_name("P_L1K0").group is None


@pytest.mark.parametrize(
    "name",
    [
        "NoUnderscore",
        "P_K1L1",
        "P_L4",
        "P_L4K",
        "P_LK1",
        "P_L4K1g",  # an option starts with an uppercase letter
        "P_L4K1G_x",
        "P_L4A1",
        "P_L100K1",  # the level does not fit 8 bits
        "P_L1K10000000000000000",  # nor the keyword 64
        "P_L1KF",  # uppercase hex
        "P\0_L1K1",
        "P" * 251 + "_L1K1",  # EVENTHEADER_NAME_MAX
    ],
)
def test_names_that_break_the_rules_are_refused(name: str) -> None:
    with pytest.raises(EventHeaderError) as caught:
        parse_tracepoint_name(name)
    assert caught.value.reason == t.BAD_TRACEPOINT_NAME
    assert not is_eventheader_name(name)


def test_the_header_extensions_and_fields_of_a_big_endian_event() -> None:
    specs = [Spec("a", E.VALUE32, F.HEX_INT, tag=0x1234, value=0xDEADBEEF)]
    activity = bytes(range(32))
    data = event(
        metadata("ev;k=v;;w", specs, True), payload(specs, True), True, 4, activity, (2, 300, 7, 1)
    )
    decoded = decode_event(NAME, data)
    assert decoded.big_endian and decoded.flags == 0x05
    assert (decoded.name, decoded.attributes) == ("ev", (("k", "v;w"),))
    assert (decoded.version, decoded.id, decoded.tag, decoded.opcode, decoded.level) == (
        2,
        300,
        7,
        1,
        4,
    )
    assert (decoded.activity_id, decoded.related_activity_id) == (activity[:16], activity[16:])
    assert decoded.fields == (t.EventField("a", 0xDEADBEEF, E.VALUE32, F.HEX_INT, 0x1234),)


def test_eventheader_offset_finds_the_flags_field_of_a_format() -> None:
    text = """name: P_L4K1
ID: 1234
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:u8 eventheader_flags;\toffset:8;\tsize:1;\tsigned:0;
\tfield:u8 version;\toffset:9;\tsize:1;\tsigned:0;

print fmt: "x"
"""
    fmt = parse_format(text)
    assert eventheader_offset(fmt) == 8
    record = bytes(8) + event(metadata("ev", [Spec("f", E.VALUE8)], False), b"\x07", False)
    assert decode_record(fmt, record).fields[0].value == 7
    assert _reason_of(lambda: decode_record(fmt, bytes(12))) == t.TRUNCATED_HEADER
    other = parse_format(text.replace("eventheader_flags", "other"))
    assert eventheader_offset(other) is None
    assert _reason_of(lambda: decode_record(other, record)) == t.NOT_EVENTHEADER


def _reason_of(call: Callable[[], object]) -> str:
    with pytest.raises(EventHeaderError) as caught:
        call()
    return caught.value.reason


def _raw_event(flags: int, level: int, rest: bytes) -> bytes:
    return struct.pack("<BBHHBB", flags, 0, 0, 0, 0, level) + rest


def _ext(size: int, kind: int, data: bytes) -> bytes:
    return struct.pack("<HH", size, kind) + data


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x07\0\0\0\0\0\0", t.TRUNCATED_HEADER),
        (_raw_event(0x0F, 4, b""), t.UNKNOWN_FLAGS),
        (_raw_event(0x03, 5, b""), t.LEVEL_MISMATCH),
        (_raw_event(0x03, 4, b""), t.NO_METADATA),
        (_raw_event(0x07, 4, b"\x01\0"), t.TRUNCATED_EXTENSION),
        (_raw_event(0x07, 4, _ext(9, 1, b"ev\0")), t.TRUNCATED_EXTENSION),
        (_raw_event(0x07, 4, _ext(3, 0x8001, b"ev\0")), t.TRUNCATED_EXTENSION),
        (_raw_event(0x07, 4, _ext(0, 0, b"")), t.INVALID_EXTENSION),
        (_raw_event(0x07, 4, _ext(3, 0x8001, b"ev\0") + _ext(3, 1, b"ev\0")), t.DUPLICATE_METADATA),
        (_raw_event(0x07, 4, _ext(8, 0x8002, bytes(8)) + _ext(3, 1, b"ev\0")), t.BAD_ACTIVITY_ID),
        (_raw_event(0x07, 4, _ext(5, 0x7FFF, b"other")), t.NO_METADATA),
        (_raw_event(0x07, 4, _ext(2, 1, b"ev")), t.UNTERMINATED_EVENT_NAME),
        (_raw_event(0x07, 4, _ext(5, 1, b"ev\0f\0")), t.TRUNCATED_FIELD),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x82")), t.TRUNCATED_FIELD),
        (_raw_event(0x07, 4, _ext(8, 1, b"ev\0f\0\x82\x80\x01")), t.TRUNCATED_FIELD),
        (_raw_event(0x07, 4, _ext(7, 1, b"ev\0f\0\x22\x01")), t.TRUNCATED_FIELD),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x00")), t.BAD_ENCODING),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x0e")), t.BAD_ENCODING),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x62")), t.BAD_ARRAY_FLAGS),
        (_raw_event(0x07, 4, _ext(8, 1, b"ev\0f\0\x22\0\0")), t.EMPTY_ARRAY),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x01")), t.EMPTY_STRUCT),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x04") + b"\x01\x02"), t.TRUNCATED_VALUE),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x07") + b"abc"), t.TRUNCATED_VALUE),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x08") + b"a\0\0b"), t.TRUNCATED_VALUE),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x0a") + b"\x05\0abc"), t.TRUNCATED_VALUE),
        (_raw_event(0x07, 4, _ext(6, 1, b"ev\0f\0\x42") + b"\x05\0abc"), t.TRUNCATED_VALUE),
    ],
)
def test_each_bad_record_gets_its_reason(data: bytes, reason: str) -> None:
    assert _reason(data) == reason


def test_a_bad_name_is_a_reason_too() -> None:
    assert _reason(_raw_event(0x03, 4, b""), name="nothing") == t.BAD_TRACEPOINT_NAME


def _nested(depth: int) -> Spec:
    spec = Spec("leaf", E.VALUE8, value=1)
    for _ in range(depth):
        spec = Spec("s", E.STRUCT, children=[spec], value=[spec.value])
    return spec


def test_structs_nest_8_deep_and_no_deeper() -> None:
    deepest = _nested(t.MAX_STRUCT_DEPTH)
    field = decode_event(NAME, event(metadata("ev", [deepest], False), b"\x01", False)).fields[0]
    for _ in range(t.MAX_STRUCT_DEPTH):
        assert isinstance(field.value, tuple)
        field = field.value[0]
    assert field.value == 1
    too_deep = _nested(t.MAX_STRUCT_DEPTH + 1)
    assert _reason(event(metadata("ev", [too_deep], False), b"\x01", False)) == t.TOO_DEEP


def test_at_most_255_top_level_fields() -> None:
    specs = [Spec("f", E.VALUE8, value=i) for i in range(t.MAX_TOP_LEVEL_FIELDS)]
    data = event(metadata("ev", specs, False), payload(specs, False), False)
    assert [f.value for f in decode_event(NAME, data).fields] == list(range(255))
    specs.append(Spec("f", E.VALUE8, value=0))
    data = event(metadata("ev", specs, False), payload(specs, False), False)
    assert _reason(data) == t.BAD_FIELD_COUNT


def test_the_values_of_one_event_are_bounded() -> None:
    # an array of 40000 structs of 2 fields: 120001 values from 80000 payload bytes
    member = Spec("m", E.VALUE8)
    spec = Spec("a", E.STRUCT, array="v", children=[member, member])
    meta = metadata("ev", [spec], False)
    many = event(meta, struct.pack("<H", 40000) + bytes(80000), False)
    assert _reason(many) == t.TOO_MANY_VALUES
    few = event(meta, struct.pack("<H", 20000) + bytes(40000), False)
    assert len(decode_event(NAME, few).fields[0].value) == 20000  # type: ignore[arg-type]


def test_empty_structs_that_take_no_bytes_are_bounded_too() -> None:
    # a constant-length array of 65535 structs whose fields the metadata cuts short
    empty_structs = b"a\0\xa1\x01\xff\xff"
    one = event(b"ev\0" + empty_structs, b"", False)
    assert decode_event(NAME, one).fields[0].value == [()] * 65535
    nested = event(b"ev\0o\0\xa1\x01\xff\xff" + empty_structs, b"", False)  # 65535 of those
    assert _reason(nested) == t.TOO_MANY_VALUES


def test_an_array_is_checked_whole_before_its_elements_are_made() -> None:
    spec = Spec("a", E.VALUE64, array="v")
    data = event(metadata("ev", [spec], False), struct.pack("<H", 65535) + bytes(8), False)
    assert _reason(data) == t.TRUNCATED_VALUE


def test_an_empty_array_of_structs_and_a_struct_the_metadata_cuts_short() -> None:
    spec = Spec("a", E.STRUCT, array="v", children=[Spec("m", E.VALUE8)])
    data = event(metadata("ev", [spec], False), b"\0\0", False)
    assert decode_event(NAME, data).fields[0].value == []
    cut = event(b"ev\0s\0\x81\x03", b"", False)  # a struct of 3 fields, then no more metadata
    assert decode_event(NAME, cut).fields[0].value == ()


def test_trailing_payload_bytes_are_ignored() -> None:
    data = event(metadata("ev", [Spec("f", E.VALUE8)], False), b"\x05padding", False)
    assert decode_event(NAME, data).fields[0].value == 5


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"\xef\xbb\xbfhi", "hi"),
        (b"\xff\xfeh\0i\0", "hi"),
        (b"\xfe\xff\0h\0i", "hi"),
        (b"\xff\xfe\0\0h\0\0\0", "h"),
        (b"\0\0\xfe\xff\0\0\0h", "h"),
        (b"hi", "hi"),
    ],
)
def test_a_byte_order_mark_says_how_to_read_the_text(raw: bytes, text: str) -> None:
    for fmt in (F.STRING_UTF_BOM, F.STRING_XML, F.STRING_JSON):
        assert _one(E.STRING_LENGTH16_CHAR8, fmt, struct.pack("<H", len(raw)) + raw) == text
    assert _one(
        E.STRING_LENGTH16_CHAR8, F.STRING_UTF, struct.pack("<H", len(raw)) + raw
    ) == utf8_or_latin1(raw)


def utf8_or_latin1(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def test_text_is_read_as_leniently_as_the_cpp_decoder_reads_it() -> None:
    assert _one(E.ZSTRING_CHAR8, F.DEFAULT, b"a\xffb\xed\xa0\x80\0") == "a\xffb\ud800"
    assert _one(E.ZSTRING_CHAR8, F.STRING8, b"\xe9\0") == "\xe9"
    assert _one(E.ZSTRING_CHAR16, F.DEFAULT, b"\x00\xd8A\0\0\0") == "\ud800A"
    assert _one(E.ZSTRING_CHAR32, F.DEFAULT, b"\xfc\xfd\xfe\xffA\0\0\0\0\0\0\0") == "\ufffdA"
    assert _one(E.VALUE32, F.STRING_UTF, b"\xfc\xfd\xfe\xff") == "\ufffd"


def test_fixed_formats_in_length_prefixed_values() -> None:
    assert _one(E.BINARY_LENGTH16_CHAR8, F.SIGNED_INT, b"\0\0") is None
    assert _one(E.BINARY_LENGTH16_CHAR8, F.SIGNED_INT, b"\x02\0\xfe\xff") == -2
    assert _one(E.BINARY_LENGTH16_CHAR8, F.SIGNED_INT, b"\x03\0abc") == b"abc"  # no int of 3
    assert _one(E.STRING_LENGTH16_CHAR8, F.SIGNED_INT, b"\x03\0abc") == "abc"
    assert _one(E.BINARY_LENGTH16_CHAR8, F.IP_ADDRESS, b"\x04\0\x7f\0\0\x01") == IPv4Address(
        "127.0.0.1"
    )
    assert _one(E.BINARY_LENGTH16_CHAR8, 0x7E, b"\x01\0a") == b"a"  # an unknown format


def test_booleans_ports_and_unknown_formats() -> None:
    assert _one(E.VALUE8, F.BOOLEAN, b"\x01") is True
    assert _one(E.VALUE8, F.BOOLEAN, b"\xff") == 255
    assert _one(E.VALUE32, F.BOOLEAN, b"\0\0\0\x80") == -(2**31)
    assert _one(E.VALUE16, F.PORT, b"\x00\x50") == 80
    assert _one(E.VALUE16, F.PORT, b"\x00\x50", big=True) == 80
    assert _one(E.VALUE64, F.ERRNO, b"\xff" * 8) == 2**64 - 1  # errno is for 4 bytes only
    assert _one(E.VALUE16, 0x7E, b"\x01\x02") == 0x0201
