# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The compression trace-cmd uses in trace.dat version 7: ``zstd`` (its default when built
with libzstd, as Debian's 3.1.6 is), ``zlib``, or ``none``.

zstd comes from the standard library from Python 3.14 (``compression.zstd``), else from the
``zstandard`` package (the ``reader`` extra). Every block says its uncompressed size; a
block that inflates to another size, or does not inflate, is a :class:`CaptureError`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from opentelemetry_exporter_userevents.reader.capture.tracing_data import CaptureError

MAX_BLOCK = 1 << 30
"""Largest uncompressed block accepted (trace-cmd writes chunks of a few pages)."""

Decompressor = Callable[[bytes, int], bytes]


def decompressor(name: str) -> Decompressor | None:
    """(compressed, uncompressed size) -> bytes for ``name``; None for ``none``."""
    if name in ("", "none"):
        return None
    if name == "zlib":
        return _checked(lambda data, size: zlib.decompress(data, bufsize=max(size, 1)))
    if name == "zstd":
        return _checked(_zstd())
    raise CaptureError(f"trace.dat is compressed with {name!r}, which is not supported")


def _zstd() -> Decompressor:
    try:
        from compression import zstd  # type: ignore[import-not-found]  # noqa: PLC0415

        return lambda data, size: bytes(zstd.decompress(data))
    except ImportError:
        pass
    try:
        import zstandard  # noqa: PLC0415
    except ImportError:
        raise CaptureError(
            "trace.dat is compressed with zstd: pip install "
            "'opentelemetry-exporter-userevents[reader]' (or record with "
            "'trace-cmd record --compression none')"
        ) from None
    context = zstandard.ZstdDecompressor()
    return lambda data, size: context.decompress(data, max_output_size=size)


def _checked(inflate: Decompressor) -> Decompressor:
    def decompress(data: bytes, size: int) -> bytes:
        if not 0 <= size <= MAX_BLOCK:
            raise CaptureError(f"trace.dat: a compressed block claims {size} bytes")
        try:
            out = inflate(data, size)
        except CaptureError:
            raise
        except Exception as error:  # each library has its own error class
            raise CaptureError(f"trace.dat: a compressed block does not inflate: {error}") from None
        if len(out) != size:
            raise CaptureError(f"trace.dat: a block inflated to {len(out)} bytes, not {size}")
        return out

    return decompress
