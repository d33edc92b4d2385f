# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A resource's id: a hash of the exact texts of its resource record, so the writer
derives it and the reader checks it (a record whose id is not the hash of its own texts is
not one the writer made, and cannot replace the resource another process announced)."""

from __future__ import annotations

import hashlib


def hash_resource(attributes_text: bytes, schema_url: bytes) -> int:
    """A stable 64-bit id: the same resource gets the same id in every process."""
    digest = hashlib.blake2b(attributes_text + b"\0" + schema_url, digest_size=8).digest()
    return int.from_bytes(digest, "little")
