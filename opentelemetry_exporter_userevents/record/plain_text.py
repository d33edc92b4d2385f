# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Plain-text fields (names, status descriptions, severity texts): readable in ``trace``
when that is lossless, the value encoding of the string otherwise."""

from __future__ import annotations

from opentelemetry_exporter_userevents.record import anyvalue

_known: dict[str, bytes] = {}
"""Recent short texts and their fields: span names, severity texts and event names repeat."""


def encode_plain(text: str) -> bytes:
    """A plain-text field: the UTF-8 text itself, readable in ``trace``, when that is
    lossless; otherwise (a NUL, a surrogate, a control character, or a leading ``"`` or
    ``{``) the JSON value encoding of the string, which starts with ``"`` or ``{``."""
    if type(text) is str:
        known = _known.get(text)
        if known is not None:
            return known
    try:
        readable = text.isprintable() and not text.startswith(('"', "{"))
    except AttributeError:
        raise anyvalue.UnsupportedValue(
            f"a name or other plain-text field must be a str, not {type(text).__qualname__}"
        ) from None
    field = text.encode("utf-8") if readable else anyvalue.encode(text).encode("utf-8")
    if type(text) is str and len(text) <= 128:
        if len(_known) >= 1024:  # never let it grow unbounded
            _known.clear()
        _known[text] = field
    return field


def decode_plain(text: str) -> str:
    """The inverse of :func:`encode_plain`."""
    if text.startswith(('"', "{")):
        value = anyvalue.decode(text)
        if not isinstance(value, str):
            raise ValueError(f"plain-text field holds a {type(value).__name__}")
        return value
    return text
