# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Redacting attributes before they leave the process.

An exporter given ``redact=`` calls ``redact(key, value)`` for each attribute it is about to
write (of spans, span events, span links, log records and resources) and writes what it
returns instead; ``None`` leaves the attribute out. Names, log bodies and instrumentation
scope attributes are not passed. It runs on the exporting thread, only for records that a
tracer listens to. If it raises, the record is dropped and counted in ``dropped_invalid``:
an unredacted record is never written.

The views below wrap the SDK's read-only span and log record, so nothing is copied but the
attributes, and the SDK's dropped counts are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Redactor = Callable[[str, Any], Any]
"""``redact(key, value) -> value to write, or None to leave the attribute out``."""


def redact_attributes(attributes: Mapping[str, Any] | None, redact: Redactor) -> dict[str, Any]:
    kept = {}
    for key, value in (attributes or {}).items():
        value = redact(key, value)
        if value is not None:
            kept[key] = value
    return kept


class _View:
    """``item`` with some attributes replaced; the rest is read from ``item``."""

    def __init__(self, item: Any, **replaced: Any) -> None:
        self._item = item
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._item, name)


def redact_span(span: Any, redact: Redactor) -> Any:
    """A view of ``span`` with its attributes, and its events' and links', redacted."""
    return _View(
        span,
        attributes=redact_attributes(span.attributes, redact),
        events=[_View(e, attributes=redact_attributes(e.attributes, redact)) for e in span.events],
        links=[_View(k, attributes=redact_attributes(k.attributes, redact)) for k in span.links],
    )


def redact_log(readable: Any, redact: Redactor) -> Any:
    """A view of a ReadableLogRecord whose log record's attributes are redacted."""
    record = readable.log_record
    return _View(
        readable, log_record=_View(record, attributes=redact_attributes(record.attributes, redact))
    )


def checked(redact: Redactor | None) -> Redactor | None:
    """``redact`` if it is None or callable; a TypeError otherwise (failing closed: a
    misconfigured redactor must not let records out unredacted)."""
    if redact is not None and not callable(redact):
        raise TypeError(f"redact must be a callable (key, value) -> value, not {redact!r}")
    return redact
