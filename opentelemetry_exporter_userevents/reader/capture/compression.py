# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The compression trace-cmd uses in trace.dat version 7: ``zstd`` (its default when built
with libzstd, as Debian's 3.1.6 is), ``zlib``, or ``none``.

zstd comes from the standard library from Python 3.14 (``compression.zstd``), else from the
``zstandard`` package (the ``reader`` extra).

A capture file is untrusted input, and a few bytes of zlib or zstd can stand for gigabytes.
Every block says its uncompressed size: a size above :data:`MAX_CHUNK` is refused before
anything is inflated, and each block is inflated by a streaming decompressor asked for at
most one byte more than it declared, so no block ever takes more than ``MAX_CHUNK + 1``
bytes, whatever its compressed data or a zstd frame header claim. A block that inflates to
more or less than it declared, or does not inflate, is a :class:`CaptureError`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from opentelemetry_exporter_userevents.reader.capture.tracing_data import CaptureError

MAX_CHUNK = 64 << 20
"""Largest uncompressed size a compressed block may declare: 64 MiB. trace-cmd 3.x compresses
a CPU's pages in chunks of a few pages, and each other section whole (the event formats,
the largest, are a few MiB even with every kernel event): a block declaring more is refused
as damaged or hostile."""

MAX_WINDOW_LOG = 26
"""zstd: the largest window a frame may ask for (2**26 = 64 MiB, :data:`MAX_CHUNK`); a frame
header asking for more is refused instead of allocated."""

_STEP = 1 << 20

Buffer = bytes | bytearray | memoryview
Decompressor = Callable[[Buffer, int], Buffer]
"""(compressed block, the uncompressed size it declares) -> exactly that many bytes, or
:class:`CaptureError`."""


def decompressor(name: str) -> Decompressor | None:
    """The bounded decompressor for ``name``; None for ``none``."""
    if name in ("", "none"):
        return None
    if name == "zlib":
        return _checked(_zlib)
    if name == "zstd":
        return _checked(_zstd())
    raise CaptureError(f"trace.dat is compressed with {name!r}, which is not supported")


def _zlib(data: Buffer, size: int) -> Buffer:
    """Inflated a MiB at a time into one buffer (one ``decompress`` call with ``max_length``
    would double its output buffer as it goes: up to twice the size)."""
    inflater = zlib.decompressobj()
    out = bytearray()
    pending: Buffer = data
    while len(out) <= size and not inflater.eof:
        piece = inflater.decompress(pending, min(size + 1 - len(out), _STEP))  # never 0
        out += piece
        pending = inflater.unconsumed_tail
        if not piece and not pending:
            break
    if len(out) <= size and not inflater.eof:
        raise CaptureError("trace.dat: a zlib block is cut short (its stream does not end)")
    return out


def _zstd() -> Decompressor:
    try:
        from compression import zstd  # type: ignore[import-not-found]  # noqa: PLC0415
    except ImportError:
        pass
    else:  # pragma: no cover (Python 3.14+)
        options = {zstd.DecompressionParameter.window_log_max: MAX_WINDOW_LOG}

        def inflate_stdlib(data: Buffer, size: int) -> bytes:
            inflater = zstd.ZstdDecompressor(options=options)
            out = bytes(inflater.decompress(data, max_length=size + 1))
            if len(out) <= size and not inflater.eof:
                raise CaptureError("trace.dat: a zstd block is cut short (its frame does not end)")
            return out

        return inflate_stdlib
    try:
        import zstandard  # noqa: PLC0415
    except ImportError:
        raise CaptureError(
            "trace.dat is compressed with zstd: pip install "
            "'opentelemetry-exporter-userevents[reader]' (or record with "
            "'trace-cmd record --compression none')"
        ) from None
    # Not ZstdDecompressor.decompress: it allocates what the frame header claims.
    context = zstandard.ZstdDecompressor(max_window_size=1 << MAX_WINDOW_LOG)

    def inflate(data: Buffer, size: int) -> bytes:
        with context.stream_reader(data, read_across_frames=False) as reader:
            return bytes(reader.read(size + 1))  # at most size + 1 bytes, then it stops

    return inflate


def _checked(inflate: Decompressor) -> Decompressor:
    def decompress(data: Buffer, size: int) -> Buffer:
        if not 0 <= size <= MAX_CHUNK:
            raise CaptureError(
                f"trace.dat: a compressed block declares {size} bytes uncompressed "
                f"(at most {MAX_CHUNK} are accepted)"
            )
        try:
            out = inflate(data, size)
        except CaptureError:
            raise
        except Exception as error:  # each library has its own error class
            raise CaptureError(f"trace.dat: a compressed block does not inflate: {error}") from None
        if len(out) > size:
            raise CaptureError(
                f"trace.dat: a compressed block inflates beyond the {size} bytes it declares"
            )
        if len(out) != size:
            raise CaptureError(f"trace.dat: a block inflated to {len(out)} bytes, not {size}")
        return out

    return decompress
