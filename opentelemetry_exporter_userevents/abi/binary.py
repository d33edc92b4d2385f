# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Fixed-width little-endian integers, defined once: how the kernel lays out ring-buffer
pages and trace records on the machines user_events runs on (x86-64, arm64), and how
trace.dat and perf.data store them. The write side, the wire contract and the read side
all import them from here."""

from __future__ import annotations

import struct

U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
S64_MIN = -(1 << 63)
S64_MAX = (1 << 63) - 1
"""The range of an s64 field, and of an OTLP int64."""
