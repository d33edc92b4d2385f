# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Fitting an oversized record into ``max_record_size``: one mechanism for spans and logs.

The encoders call it only for a record that does not fit. Each signal lists its steps in
order (see the encoders); every step works on what the encoder already has, the
attribute values and each event's or link's text, never on decoded JSON:

1. texts longer than an eighth of the record are cut to that, so one huge text cannot
   push out everything else (:meth:`RecordFitter.cap_texts`);
2. events, then links, are left out from the end (:meth:`RecordFitter.drop_items`);
3. attributes are left out, largest first (:meth:`RecordFitter.drop_attributes`);
4. a log body is cut to a readable string prefix (:meth:`RecordFitter.cut_body`);
5. texts are cut further (:meth:`RecordFitter.cut_texts`).

Whatever is left out is counted in the record's dropped counts and marked in its
``truncated`` bits (record.flags); a cut text ends with TRUNCATION_MARK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry_exporter_userevents._export.attributes import encoded_sizes
from opentelemetry_exporter_userevents.record import anyvalue
from opentelemetry_exporter_userevents.record.flags import (
    TRUNCATED_ATTRIBUTES,
    TRUNCATED_TEXT,
    TRUNCATION_MARK,
)
from opentelemetry_exporter_userevents.record.schema import Schema

_MARK = TRUNCATION_MARK.encode()


class RecordFitter:
    """The texts of one record being cut to fit; ``truncated`` collects the bits."""

    def __init__(self, schema: Schema, texts: list[bytes], max_size: int) -> None:
        self.schema = schema
        self.texts = texts
        """Changed in place."""
        self.max_size = max_size
        self.truncated = 0

    def over(self) -> int:
        """Bytes the record is over its size; 0 or less once it fits."""
        return self.schema.size(self.texts) - self.max_size

    def cap_texts(self, slots: Sequence[int]) -> None:
        """Cut each of these texts longer than an eighth of the record to that."""
        cap = self.max_size // 8
        for slot in slots:
            if self.over() > 0 and len(self.texts[slot]) > cap:
                self.texts[slot] = cut_text(self.texts[slot], cap)
                self.truncated |= TRUNCATED_TEXT

    def drop_items(self, slot: int, parts: list[bytes], flag: int) -> int:
        """Leave out events or links (whose JSON texts are ``parts``) from the end until the
        record fits or none is left; return how many were left out."""
        over = self.over()
        if over <= 0 or not parts:
            return 0
        kept = len(parts)
        while over > 0 and kept:
            kept -= 1
            over -= len(parts[kept]) + (1 if kept else 0)  # the item and the comma before it
        self.texts[slot] = b"[" + b",".join(parts[:kept]) + b"]"
        self.truncated |= flag
        return len(parts) - kept

    def drop_attributes(self, slot: int, attributes: Mapping[str, Any] | None) -> int:
        """Leave out the largest attributes until the record fits (or none is left); return
        how many were left out. Linear in the number of attributes: each is measured once,
        and the result is encoded once (a few more times only for the ``~m`` form, whose
        size is not the sum of its attributes')."""
        over = self.over()
        if over <= 0 or not attributes:
            return 0
        size = encoded_sizes(attributes)  # only attributes that were written have a size
        kept = {key: attributes[key] for key in size}
        if not kept:
            return 0
        by_size = sorted(kept, key=size.__getitem__)
        text = self.texts[slot]
        left_out = 0
        estimate = over
        while estimate > 0 and by_size:
            key = by_size.pop()
            estimate -= size[key] - 1  # '"key":value' and one comma
            del kept[key]
            left_out += 1
        result = anyvalue.encode(kept).encode()
        batch = 1
        while len(text) - len(result) < over and by_size:  # the ~m form: drop more, doubling
            for _ in range(min(batch, len(by_size))):
                del kept[by_size.pop()]
                left_out += 1
            batch *= 2
            result = anyvalue.encode(kept).encode()
        self.texts[slot] = result
        if left_out:
            self.truncated |= TRUNCATED_ATTRIBUTES
        return left_out

    def cut_body(self, slot: int) -> None:
        """Make a body (any value, in the value encoding) a string: its readable prefix,
        ending with the marker, as short as the record needs."""
        if self.over() <= 0:
            return
        body = self.texts[slot]
        target = max(len(body) - self.over(), 0)
        while True:  # escapes may grow the re-encoded prefix
            self.texts[slot] = anyvalue.encode(cut_text(body, target).decode()).encode()
            if self.over() <= 0 or target == 0:
                break
            target = max(target - max(self.over(), 1), 0)
        self.truncated |= TRUNCATED_TEXT

    def cut_texts(self, slots: Sequence[int]) -> None:
        """Cut these texts, in order, by what the record is still over."""
        for slot in slots:
            over = self.over()
            if over > 0:
                self.texts[slot] = cut_text(self.texts[slot], len(self.texts[slot]) - over)
                self.truncated |= TRUNCATED_TEXT


def cut_text(text: bytes, size: int) -> bytes:
    """``text`` cut to at most ``size`` bytes, ending with the marker, as valid UTF-8 that a
    reader decodes as plain text (an encoded form is replaced by its readable prefix)."""
    keep = max(size - len(_MARK), 0)
    readable = text.decode("utf-8")
    if readable.startswith(('"', "{")):  # a JSON form: keep a plain, printable prefix
        prefix = readable.lstrip('"{')[:keep]  # no more characters than bytes can be kept
        readable = "".join(c if c.isprintable() else "?" for c in prefix)
    cut = readable.encode()[:keep].decode("utf-8", "ignore")
    return cut.encode() + _MARK
