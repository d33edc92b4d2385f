# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The AnyValue text form: exact round trips, readable text, safe bytes, clear errors."""

import math
import sys
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.attributes import BoundedAttributes

from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record.anyvalue import (
    MAX_DEPTH,
    UnsupportedValue,
    decode,
    encode,
    encode_flat,
    encode_str,
)


def same(a, b):
    """Equal, with the same types all the way down; NaN equals NaN, -0.0 differs from 0.0."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    return a == b


def check(value, expected=None):
    """Encode value, check the text is fit for the record, and return it after the round trip."""
    text = encode(value)
    assert type(text) is str
    assert "\x00" not in text
    text.encode("utf-8")  # strict: no surrogates
    decoded = decode(text)
    assert same(decoded, value if expected is None else expected), (value, text, decoded)
    return text


class Attributes(Mapping):
    """A Mapping that is no dict, as the SDK's BoundedAttributes: always the general path."""

    def __init__(self, items):
        self._items = dict(items)

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)


def nested(depth, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_same_is_strict():
    assert same([1, {"a": 1.0}], [1, {"a": 1.0}])
    assert not same(1, True)
    assert not same(1, 1.0)
    assert not same(0.0, -0.0)
    assert same(math.nan, math.nan)
    assert not same((1,), [1])
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1})


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        1,
        -1,
        2**63 - 1,
        2**64,
        -(2**64),
        2**200,
        -(2**200),
        2**2048 - 1,
        2**2048,
        -(2**2048),
        0.0,
        -0.0,
        1.0,
        1.5,
        1e16,
        5e-324,
        sys.float_info.max,
        math.inf,
        -math.inf,
        "",
        "a\x00b",
        "\x01\x1b[31m\x7f\x85\u2028\u2029",
        "\ud800",
        "\udfff",
        "\ude00\ud83d",
        "\ud83d\ude00",
        "a\ud83d\ude00b\ud83d\ude00",
        "\ud83d\ud83d\ude00\ude00",
        "\ud83d\\ude00",
        "😀",
        "héllo wörld ✓",
        b"",
        b"\x00",
        bytes(range(256)),
        [],
        {},
        [1, "a", None, 2.5, b"x", [True]],
        {"a": {"b": {"c": [1, {"d": b"\xff"}]}}},
        {"~b": 1},
        {"~b": b"x"},
        {"~~b": 1},
        {"~": 1, "~~": 2, "~x~": 3},
        {"~f": "NaN"},
        {"\ud83d\ude00": 1, "~k": [b"x"], "b": "\ud83d\ude00"},
        {"\ud800": "\udc00"},
        nested(MAX_DEPTH),
    ],
)
def test_round_trip(value):
    check(value)


def test_integer_beyond_str_conversion_limit():
    huge = 10**5000  # more digits than Python converts to str by default
    check(huge)
    check(-huge)
    check({"n": huge})
    assert encode(huge).startswith('{"~i":"0x')


def test_nan():
    assert math.isnan(decode(check(math.nan)))


def test_bool_int_float_stay_apart():
    assert [type(v) for v in decode(encode([True, 1, 1.0]))] == [bool, int, float]
    assert encode([True, 1, 1.0]) == "[true,1,1.0]"


def test_surrogate_pair_code_points_are_not_merged():
    pair = "\ud83d\ude00"
    assert len(decode(encode(pair))) == 2
    assert decode(encode("😀")) == "😀"
    assert decode(encode([pair, "😀"])) == [pair, "😀"]


def test_sequences_and_mappings_decode_as_list_and_dict():
    check((1, "a", (2.0,)), [1, "a", [2.0]])
    check(MappingProxyType({"a": (1,), "b": 2}), {"a": [1], "b": 2})
    check(OrderedDict([("z", 1), ("a", 2)]), {"z": 1, "a": 2})
    check(Attributes({"z": [1], "a": {"b": 2}}), {"z": [1], "a": {"b": 2}})
    check(bytearray(b"ab"), b"ab")
    check(memoryview(b"ab"), b"ab")


def test_mapping_types_encode_alike():
    value = {"s": "é\ud800", "i": 2**2048, "f": math.nan, "~": 1, "n": None}
    for one in [{"a": 1}, {"a": "\x85"}, value] + [{key: item} for key, item in value.items()]:
        text = encode(one)
        assert text == encode(MappingProxyType(one)) == encode(OrderedDict(one))
        assert text == encode(Attributes(one))


def test_text_is_readable():
    assert encode({"http.method": "GET", "n": 1}) == '{"http.method":"GET","n":1}'
    assert encode("héllo") == '"héllo"'
    assert encode("😀") == '"😀"'
    assert encode(None) == "null"
    assert encode(-0.0) == "-0.0"
    assert encode(2**64) == "18446744073709551616"
    assert encode(("a", 1)) == '["a",1]'
    assert encode("a\x00b\n") == '"a\\u0000b\\n"'
    assert encode("\x85\u2028") == '"\\u0085\\u2028"'


def test_special_values_are_tagged():
    assert encode(b"hi") == '{"~b":"aGk="}'
    assert encode(b"") == '{"~b":""}'
    assert encode(math.nan) == '{"~f":"NaN"}'
    assert encode(math.inf) == '{"~f":"Infinity"}'
    assert encode(-math.inf) == '{"~f":"-Infinity"}'
    assert encode(-(2**2048)) == '{"~i":"-0x1' + "0" * 512 + '"}'
    assert encode("\ud800") == '"\\ud800"'
    assert encode("a\ud83d\ude00") == '{"~s":["a\\ud83d","\\ude00"]}'
    assert encode({"~b": 1}) == '{"~~b":1}'
    assert encode({"\ud83d\ude00": 1}) == '{"~m":[[{"~s":["\\ud83d","\\ude00"]},1]]}'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1, 2}, "unsupported type set at attributes"),
        (object(), "unsupported type object at attributes"),
        ({"a": [1, 2, {3}]}, 'unsupported type set at attributes["a"][2]'),
        ([None, {"k": object()}], 'unsupported type object at attributes[1]["k"]'),
        ({1: "x"}, "mapping key of type int (keys must be str) at attributes"),
        ({"a": {None: 1}}, 'mapping key of type NoneType (keys must be str) at attributes["a"]'),
        (
            {"a": {"b": 1, True: 2}},
            'mapping key of type bool (keys must be str) at attributes["a"]',
        ),
        (nested(MAX_DEPTH + 1), "nested deeper than MAX_DEPTH (64) at attributes" + "[0]" * 64),
    ],
)
def test_unsupported(value, message):
    with pytest.raises(UnsupportedValue) as caught:
        encode(value, "attributes")
    assert message in str(caught.value)
    assert isinstance(caught.value, TypeError)


def test_self_reference_is_unsupported():
    loop = []
    loop.append(loop)
    with pytest.raises(UnsupportedValue, match=r"MAX_DEPTH .* at value\[0\]"):
        encode(loop)
    mapping = {}
    mapping["me"] = mapping
    with pytest.raises(UnsupportedValue, match=r'at value\["me"\]\["me"\]'):
        encode(mapping)


def test_default_path_name():
    with pytest.raises(UnsupportedValue, match=r"unsupported type set at value\[0\]$"):
        encode([set()])


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[1,]",
        '"a" "b"',
        "NaN",
        "-Infinity",
        "1e400",
        '{"~b":"!!"}',
        '{"~b":"A"}',
        '{"~b":"é"}',
        '{"~b":1}',
        '{"~f":"x"}',
        '{"~f":"nan"}',
        '{"~f":[1]}',
        '{"~f":{}}',
        '{"~i":"xyz"}',
        '{"~i":12}',
        '{"~s":"a"}',
        '{"~s":["a",1]}',
        '{"~m":{}}',
        '{"~m":[[1,2]]}',
        '{"~m":[["a"]]}',
        '{"~m":[[{"x":1},2]]}',
        '{"~x":1}',
        '{"~":1}',
        '{"~b":"AA==","a":1}',
        '{"a":{"~q":[]}}',
        "[" * 10000,
        "[" * 10000 + "]" * 10000,
        nested(MAX_DEPTH + 1).__repr__(),
    ],
)
def test_decode_rejects(text):
    with pytest.raises(ValueError, match="not an encoded AnyValue"):
        decode(text)


def test_decode_takes_str():
    with pytest.raises(TypeError):
        decode(b"1")


# Strings from every code point, surrogates included, with extra weight on the awkward ones.
characters = st.characters(codec=None, exclude_categories=())
awkward = st.sampled_from(
    ["\ud83d\ude00", "\udbff\udfff", "\ud83d", "\ude00", "\x00", "\x85", "\u2028", "~", '"', "😀"]
)
texts = st.text(alphabet=characters) | st.lists(awkward | characters).map("".join)
keys = texts | st.sampled_from(["~", "~b", "~~b", "~f", "~s", "~m", "~i"])
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**3000), max_value=2**3000)
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts
    | st.binary()
)
any_values = st.recursive(
    scalars,
    lambda children: st.lists(children) | st.dictionaries(keys, children),
    max_leaves=20,
)


@settings(max_examples=300)
@given(any_values)
def test_round_trip_property(value):
    check(value)


@settings(max_examples=300)
@given(st.dictionaries(keys, scalars))
def test_fast_path_matches_general_path(value):
    assert encode(value) == encode(Attributes(value)) == encode([value])[1:-1]
    check(value)


@settings(max_examples=300)
@given(st.dictionaries(keys, scalars))
def test_encode_flat_writes_what_encode_writes_or_declines(value):
    bounded = BoundedAttributes(attributes=value) if "" not in value else None
    for mapping in (value, MappingProxyType(value), bounded):
        if mapping is None:
            continue
        text = encode_flat(mapping)
        if text is not None:
            assert text == encode(dict(mapping))
    assert encode_flat(Attributes(value)) is None, "other mappings take the general path"


def test_encode_flat_declines_what_needs_the_general_path():
    assert encode_flat({"a": 1}) == '{"a":1}'
    assert encode_flat(BoundedAttributes(attributes={"a": 1, "b": (1, 2)})) is None
    for value in (
        {"~b": 1},
        {"a": b"x"},
        {"a": float("nan")},
        {"a": 2**2048},
        {"a": "\ud83d\ude00"},
    ):
        assert encode_flat(value) is None, value
    assert encode_flat({"a": "\ud800"}) == '{"a":"\\ud800"}'


@settings(max_examples=300)
@given(texts)
def test_encode_str_writes_what_encode_writes_or_declines(text):
    written = encode_str(text)
    assert written == encode(text) or (written is None and encode(text).startswith('{"~s"'))
    assert encode_str(b"x") is None


def test_untagged_text_is_not_copied(monkeypatch):
    # Most texts (attributes, events) hold no tag: decode returns what json read, without
    # rebuilding every container (the general path's cost, measured in the reader).
    monkeypatch.setattr(anyvalue, "_restore", None)  # the general path would fail
    assert decode('{"a":[1,2.5,{"b":null}],"c":"x~y","d":true}') == {
        "a": [1, 2.5, {"b": None}],
        "c": "x~y",
        "d": True,
    }


@pytest.mark.parametrize(
    "text",
    [
        '{"\\u007eb":"aGk="}',  # an escaped tilde is still a tag
        '{"a":[{"\\u007e~k":1}]}',
        '["~b",{"k":"~s"}]',
        '{"a":[1,2,{"b":1e400}]}',
        '[{"a":1.5e308}]',
        nested(MAX_DEPTH).__repr__(),
        nested(MAX_DEPTH + 1).__repr__(),
        "[" * 200 + "]" * 200,
    ],
)
def test_untagged_check_agrees_with_the_general_path(text):
    def general(text):
        try:
            return anyvalue._restore(anyvalue._loads(text), 0)
        except ValueError as exc:
            return str(exc)

    try:
        got = decode(text)
    except ValueError as exc:
        got = str(exc)
    assert same(got, general(text))


@settings(max_examples=300)
@given(any_values)
def test_untagged_check_agrees_on_every_value(value):
    text = encode(value)
    assert same(decode(text), anyvalue._restore(anyvalue._loads(text), 0))
