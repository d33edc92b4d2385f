# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OTLP's ``SpanFlags`` bits beyond the W3C trace flags, for the direct encoders (OTLP/JSON
and protobuf write the same ``flags`` field)."""

from __future__ import annotations

CONTEXT_HAS_IS_REMOTE_MASK = 0x100
"""Whether the parent's (or the link's) context says if it is remote."""
CONTEXT_IS_REMOTE_MASK = 0x200
"""The parent's (or the link's) context is remote."""
