# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Plain-text fields (names, status descriptions, severity texts): readable in ``trace``
when that is lossless, the value encoding of the string otherwise."""

from __future__ import annotations

from opentelemetry_exporter_userevents.record import anyvalue


def encode_plain(text: str) -> bytes:
    """A plain-text field: the UTF-8 text itself, readable in ``trace``, when that is
    lossless; otherwise (a NUL, a surrogate, a control character, or a leading ``"`` or
    ``{``) the JSON value encoding of the string, which starts with ``"`` or ``{``."""
    try:
        readable = text.isprintable() and not text.startswith(('"', "{"))
    except AttributeError:
        raise anyvalue.UnsupportedValue(
            f"a name or other plain-text field must be a str, not {type(text).__qualname__}"
        ) from None
    if readable:
        return text.encode("utf-8")
    return anyvalue.encode(text).encode("utf-8")


def decode_plain(text: str) -> str:
    """The inverse of :func:`encode_plain`."""
    if text.startswith(('"', "{")):
        value = anyvalue.decode(text)
        if not isinstance(value, str):
            raise ValueError(f"plain-text field holds a {type(value).__name__}")
        return value
    return text
