# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The estimate of a batch's bytes that the sending queue's byte bound counts
(``--sending-queue-max-mb``, :mod:`.output_stage`)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from opentelemetry_exporter_userevents.reader.decode.joinable import EncodedRecord
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord, Telemetry

ITEM_BYTES = 1024
"""Estimate of one item's fixed part (the objects that hold it; Python objects, not the
wire size)."""
SAMPLED_ITEMS = 32
"""Items of a batch whose values are walked for its byte estimate."""
VALUE_BYTES = 64
"""Estimate of each value in an item (a scalar, a container, an entry of a mapping), to
which a string's or bytes' length is added."""


def estimated_bytes(items: Sequence[Telemetry]) -> int:
    """The estimate the queue's byte bound counts, per batch: :data:`ITEM_BYTES` per item,
    and the values of up to :data:`SAMPLED_ITEMS` items drawn at random (all of a smaller
    batch), scaled to the batch: an unbiased estimate a writer cannot aim at, for a tenth
    of the cost of walking every item on the read path."""
    count = len(items)
    if count <= SAMPLED_ITEMS:
        return count * ITEM_BYTES + sum(map(_value_bytes, items))
    sample = random.sample(range(count), SAMPLED_ITEMS)
    values = sum(_value_bytes(items[n]) for n in sample)
    return count * ITEM_BYTES + values * count // SAMPLED_ITEMS


def _value_bytes(item: Telemetry) -> int:
    """A span's or log's values, nested ones too (attributes, events, a log's body), at
    :data:`VALUE_BYTES` each plus a string's length: what the decoder built, whose size
    the record's payload bounds (64 KiB); an encoded one's item. Resources and scopes are
    shared, not counted; SDK objects and metric points count none."""
    if type(item) is not JoinedRecord:
        return 0
    checked = item.checked
    if type(checked) is EncodedRecord:  # encoded where it was decoded: its item is its size
        return VALUE_BYTES + len(checked.item or "")
    total = 0
    stack: list[Any] = list(checked)
    pop, push = stack.pop, stack.append
    while stack:
        value = pop()
        kind = type(value)
        if kind is str or kind is bytes:
            total += VALUE_BYTES + len(value)
            continue
        total += VALUE_BYTES
        if kind is dict:
            members: Any = (*value.keys(), *value.values())
        elif isinstance(value, list | tuple):
            members = value
        else:
            continue
        for member in members:  # scalars counted here: most values are, and a push costs
            inner = type(member)
            if inner is str or inner is bytes:
                total += VALUE_BYTES + len(member)
            elif inner is int or inner is float or inner is bool or member is None:
                total += VALUE_BYTES
            else:
                push(member)
    return total
