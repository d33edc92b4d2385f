# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Text form of OpenTelemetry AnyValues (attribute values, event and link data, log bodies).

The text goes into a ``__rel_loc char[]`` field of a user_events record, where people read
it in ftrace's ``trace_pipe`` and a reader later decodes it.  So it is compact JSON, readable
(non-ASCII characters stay as themselves), and yet lossless for every AnyValue and safe for
the record: valid UTF-8 without a NUL.  Bytes, non-finite floats, huge integers and strings
JSON cannot carry exactly use single-key objects whose key starts with ``~``.  The format is
described in docs/value-encoding.md.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Mapping
from json import encoder as _json_encoder
from types import MappingProxyType
from typing import Any

from opentelemetry.attributes import BoundedAttributes

from opentelemetry_exporter_userevents.record.value_errors import UnsupportedValue

__all__ = ["MAX_DEPTH", "UnsupportedValue", "decode", "encode", "encode_flat", "encode_str"]

MAX_DEPTH = 64
"""How many containers (sequences, mappings) may be nested in one value."""


# Integers this large in magnitude are written in hex: 2**2048 has 617 decimal digits, fewer
# than the smallest int/str conversion limit Python accepts (sys.set_int_max_str_digits:
# 640), so every decimal integer we write can be read back by any process.
_INT_LIMIT = 1 << 2048
_SIMPLE = frozenset((str, int, float, bool, type(None)))
_STR = frozenset((str,))
_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_TAGS = ("~b", "~f", "~i", "~s", "~m")

_json_dumps = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, check_circular=False, separators=(",", ":")
).encode
_encode_basestring: Callable[[str], str] = _json_encoder.encode_basestring


def _no_default(value: Any) -> Any:
    raise TypeError(f"{type(value).__qualname__} is not JSON")


def _c_dumps() -> Callable[[Any], str]:
    """What ``_json_dumps`` writes, without the encoder object that ``JSONEncoder.encode``
    builds on every call (two thirds of the cost of a small value). Falls back to
    ``_json_dumps`` where the C encoder is missing or writes anything different."""
    make = getattr(_json_encoder, "c_make_encoder", None)
    if make is None:
        return _json_dumps
    try:
        chunks = make(None, _no_default, _encode_basestring, None, ":", ",", False, False, False)

        def dumps(value: Any) -> str:
            return "".join(chunks(value, 0))

        sample: dict[str, Any] = {
            "a": [1, -2.5e300, True, None, 'é\x00"' + chr(0xD800)],
            "b": {},
            "c": [{}, []],
        }
        if dumps(sample) == _json_dumps(sample):
            return dumps
    except Exception:  # noqa: BLE001 - another Python's encoder: use the public one
        pass
    return _json_dumps


_dumps = _c_dumps()

# Escaped as \uXXXX after json (which already escapes NUL and the other C0 controls):
# surrogates, which UTF-8 cannot encode, and the C1 controls and U+2028/U+2029, which
# terminals or str.splitlines() take as controls or line breaks.  All of them can only be
# inside JSON strings, and \uXXXX decodes back to the same code point... (The patterns are raw
# strings, whose \u escapes re reads: the compiled build cannot hold a surrogate literal.)
_ESCAPE = re.compile(r"[\x80-\x9f\u2028\u2029\ud800-\udfff]")
# ...except a high surrogate followed by a low one, which JSON decodes as one astral
# character: strings holding such a pair are written as {"~s": [parts]}, split between them.
_PAIR = re.compile(r"[\ud800-\udbff][\udc00-\udfff]")
_PAIR_SPLIT = re.compile(r"(?<=[\ud800-\udbff])(?=[\udc00-\udfff])")


def _escape_char(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def encode(value: Any, path: str = "value") -> str:
    """Return the text form of an AnyValue; ``path`` names it in error messages.

    Raises :class:`UnsupportedValue` for anything else.
    """
    if type(value) is str:  # log bodies, names: the fast path
        text = encode_str(value)
        if text is not None:
            return text
    elif isinstance(value, _FLAT_MAPPINGS):  # attributes: try the fast path
        text = encode_flat(value)
        if text is not None:
            return text
    try:
        prepared = _prepare(value, 0)
    except _Unsupported as exc:
        where = "".join(f"[{json.dumps(key)}]" for key in reversed(exc.keys))
        raise UnsupportedValue(f"{exc.args[0]} at {path}{where}") from None
    kind = type(prepared)
    if kind is int or kind is float:  # what json writes, without building an encoder
        return repr(prepared)
    text = _dumps(prepared)
    return text if text.isascii() else _ESCAPE.sub(_escape_char, text)


# Mappings that attributes come in; the SDK's copy() of the last two is a C-speed dict copy.
_FLAT_MAPPINGS = (dict, MappingProxyType, BoundedAttributes)


def encode_flat(value: Mapping[str, Any]) -> str | None:
    """What :func:`encode` writes for a dict, MappingProxyType or BoundedAttributes of
    simple values (str, int, float, bool, None) with str keys; None when it needs
    :func:`encode` itself. Lets callers build larger texts from attributes cheaply."""
    kind = type(value)
    if kind is BoundedAttributes or kind is MappingProxyType:  # the SDK's: a C-speed copy
        value = value.copy()  # type: ignore[attr-defined]
        if type(value) is not dict:
            value = dict(value)
    elif kind is not dict:
        if not isinstance(value, _FLAT_MAPPINGS):
            return None
        value = dict(value)  # a subclass of one of them
    return _encode_flat(value)  # type: ignore[arg-type]  # a dict now


def encode_str(text: Any) -> str | None:
    """What :func:`encode` writes for the str ``text``; None when it needs :func:`encode`
    (not a str, or a surrogate pair that takes the ``~s`` form)."""
    if type(text) is not str:
        return None
    out = _encode_basestring(text)
    if out.isascii() or not _ESCAPE.search(out):
        return out
    return None if _PAIR.search(text) else _ESCAPE.sub(_escape_char, out)


def _encode_flat(value: dict[str, Any]) -> str | None:
    """The fast path for a dict of simple values with str keys; None leaves it to _prepare."""
    if not (_STR.issuperset(map(type, value)) and _SIMPLE.issuperset(map(type, value.values()))):
        return None
    try:
        text = _dumps(value)
    except ValueError:  # NaN, infinity, or an integer over the int/str conversion limit
        return None
    # A key that needs a "~" escape starts right after "{" or ",": inside strings, json
    # writes '"' as '\"'.  Only a text this long can hold an integer of _INT_LIMIT.
    if '{"~' in text or ',"~' in text or (len(text) > 616 and not _small_ints(value)):
        return None
    if text.isascii() or not _ESCAPE.search(text):
        return text
    return None if _PAIR.search(text) else _ESCAPE.sub(_escape_char, text)


def _small_ints(value: dict[str, Any]) -> bool:
    return all(-_INT_LIMIT < v < _INT_LIMIT for v in value.values() if type(v) is int)


class _Unsupported(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.keys: list[str | int] = []  # the path, innermost first


def _prepare(value: Any, depth: int) -> Any:
    """Return what json writes for ``value``: tags applied, user keys escaped."""
    if isinstance(value, str):
        if not value.isascii() and _PAIR.search(value):
            return {"~s": _PAIR_SPLIT.split(value)}
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        value = int(value)
        return value if -_INT_LIMIT < value < _INT_LIMIT else {"~i": hex(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        return {"~f": "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"~b": base64.b64encode(bytes(value)).decode("ascii")}
    if not isinstance(value, (list, tuple, dict, Mapping)):
        raise _Unsupported(f"unsupported type {type(value).__qualname__}")
    if depth >= MAX_DEPTH:
        raise _Unsupported(f"containers nested deeper than MAX_DEPTH ({MAX_DEPTH})")
    if isinstance(value, (list, tuple)):
        return [_child(index, item, depth) for index, item in enumerate(value)]
    for key in value:
        if not isinstance(key, str):
            raise _Unsupported(f"mapping key of type {type(key).__qualname__} (keys must be str)")
    if any(not key.isascii() and _PAIR.search(key) for key in value):
        # A key holds a surrogate pair: write [key, value] pairs, where keys can be tagged.
        return {"~m": [[_prepare(key, 0), _child(key, item, depth)] for key, item in value.items()]}
    return {
        "~" + key if key[:1] == "~" else key: _child(key, item, depth)
        for key, item in value.items()
    }


def _child(key: str | int, item: Any, depth: int) -> Any:
    try:
        return _prepare(item, depth + 1)
    except _Unsupported as exc:
        exc.keys.append(key)
        raise


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_loads = _decoder.decode
_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(_decoder)  # type: ignore[attr-defined]


def _read(text: str) -> Any:
    """``_loads(text)``, without its wrapper's two calls and two regex matches where the
    text is one JSON value from its first character to its last (as encode writes it)."""
    try:
        value, end = _scan(text, 0)
        if end == len(text):
            return value
    except StopIteration:  # leading whitespace, or no value: json's own error below
        pass
    return _loads(text)  # trailing whitespace is fine; extra data is its error


def decode(text: str) -> Any:
    """Return the value :func:`encode` wrote as ``text``; sequences come back as lists.

    Raises :class:`ValueError` if ``text`` is not something :func:`encode` writes.
    """
    if not isinstance(text, str):
        raise TypeError(f"decode() takes str, not {type(text).__qualname__}")
    try:
        value = _read(text)
    except RecursionError:
        _invalid("nested too deeply")
    except ValueError as exc:
        _invalid(str(exc))
    if '"~' in text or "\\u" in text:  # a tag or an escaped key may be there (or "\u007e")
        return _restore(value, 0)
    _check_untagged(value, 0)  # most texts: what json read is the value itself
    return value


def _invalid(reason: str) -> Any:
    raise ValueError(f"not an encoded AnyValue: {reason}") from None


_UNTAGGED_SCALARS = frozenset((str, int, bool, type(None)))


def _check_untagged(value: Any, depth: int) -> None:
    """What :func:`_restore` checks in a value whose text holds no key starting with ``~``
    (no tag, no escaped key): its depth and finite floats, without copying it. Attribute
    texts are mostly flat: one look at their items' types."""
    kind = type(value)
    if kind is dict:
        items = value.values()
    elif kind is list:
        items = value
    else:
        if kind is float and not math.isfinite(value):
            _invalid("number out of range")
        return
    if depth >= MAX_DEPTH:
        _invalid(f"containers nested deeper than MAX_DEPTH ({MAX_DEPTH})")
    if not _UNTAGGED_SCALARS.issuperset(map(type, items)):
        for item in items:
            _check_untagged(item, depth + 1)


def _restore(value: Any, depth: int) -> Any:
    """Undo _prepare on what json read."""
    kind = type(value)
    if kind is float and not math.isfinite(value):
        _invalid("number out of range")
    if kind is not list and kind is not dict:
        return value
    if kind is dict and len(value) == 1:
        ((key, item),) = value.items()
        if key in _TAGS:
            return _untag(key, item, depth)
    if depth >= MAX_DEPTH:
        _invalid(f"containers nested deeper than MAX_DEPTH ({MAX_DEPTH})")
    if kind is list:
        return [_restore(item, depth + 1) for item in value]
    mapping = {}
    for key, item in value.items():
        if key[:1] == "~":
            if key[1:2] != "~":
                _invalid(f"unescaped key {key!r}: tags stand alone, user keys get another ~")
            key = key[1:]
        mapping[key] = _restore(item, depth + 1)
    return mapping


def _untag(tag: str, item: Any, depth: int) -> Any:
    kind = type(item)
    if tag == "~b" and kind is str:
        try:
            return base64.b64decode(item, validate=True)
        except (binascii.Error, ValueError) as exc:
            _invalid(f"bad base64 in ~b: {exc}")
    if tag == "~f" and kind is str and item in _FLOATS:
        return _FLOATS[item]
    if tag == "~i" and kind is str:
        try:
            return int(item, 16)
        except ValueError:
            _invalid(f"bad hex integer in ~i: {item!r:.60}")
    if tag == "~s" and kind is list and all(type(part) is str for part in item):
        return "".join(item)
    if tag == "~m" and kind is list:
        if depth >= MAX_DEPTH:
            _invalid(f"containers nested deeper than MAX_DEPTH ({MAX_DEPTH})")
        mapping = {}
        for pair in item:
            if type(pair) is not list or len(pair) != 2:
                _invalid("~m entries must be [key, value] pairs")
            key = _restore(pair[0], depth) if type(pair[0]) is dict else pair[0]
            if type(key) is not str:
                _invalid("~m keys must be strings")
            mapping[key] = _restore(pair[1], depth + 1)
        return mapping
    return _invalid(f"bad {tag} value {item!r:.60}")
