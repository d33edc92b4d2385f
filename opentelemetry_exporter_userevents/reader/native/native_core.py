# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The native core as Python sees it: plans in, one call per chunk of pages (or perf
samples), its entries out.

The extension module ``_core`` is built by :mod:`.build_core` (in the wheel, or in place
in a checkout). Where it is missing or cannot load, or ``OTEL_EXPORTER_USER_EVENTS_READER_CORE``
is ``python``, :func:`load_core` says why and the reader decodes in Python, which gives the
same output (tests/reader/native/); ``native`` makes a missing core an error instead.
"""

from __future__ import annotations

import importlib
import os
import struct
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

READER_CORE = "OTEL_EXPORTER_USER_EVENTS_READER_CORE"
"""``auto`` (the default: native if it loads), ``python``, or ``native`` (required)."""

_MODULE = "opentelemetry_exporter_userevents.reader.native._core"
SPAN, LOG = 1, 2
"""A plan's kind (core.h UEV_SPAN, UEV_LOG)."""
INT, CHARS, TEXT = 0, 1, 2
"""A field's kind (core.h UEV_INT, UEV_CHARS, UEV_TEXT)."""
OTLP_JSON, OTLP_PROTO = 0, 1
"""What the items are (core.h UEV_OTLP_JSON, UEV_OTLP_PROTO): OTLP/JSON objects, or OTLP
protobuf fields."""
E_SPAN, E_LOG, E_RECORD, E_PAGE = 1, 2, 3, 4
"""What an entry is (core.h UEV_E_*): a span or log encoded, a record or a page for the
Python path."""
MAX_FIELDS = 24
SCOPES = 64
"""Distinct scope texts a call keeps; a record of another is left to the Python path."""

MAX_TEXT = 16 << 20
"""The most a call's items may take; an item past it goes to the Python path (a chunk is
32 pages, or a perf.data's samples: a few hundred KiB in all)."""

_ENTRY = struct.Struct("<QQIIIIiiHBB4x")
"""core.h's uev_entry, as the compiler lays it out (checked when the core loads)."""


class Entry(NamedTuple):
    timestamp: int
    resource_id: int
    item_off: int
    item_len: int
    rec_off: int
    rec_len: int
    pid: int
    scope: int
    plan: int
    status: int
    truncated: int


class Result(NamedTuple):
    """What one call gave: its entries (as tuples in :class:`Entry`'s order), the items'
    text, the scope table (offset, length in the input), and its counts."""

    entries: Iterator[tuple[Any, ...]]
    text: str | bytes
    """The items: OTLP/JSON (ASCII) text, or protobuf bytes."""
    scopes: list[tuple[int, int]]
    pages: int
    missed_pages: int
    records: int


class NativeCore:
    """One core: its plans (event id to fields), and buffers reused from call to call."""

    def __init__(self, module: Any, encoding: int = OTLP_JSON) -> None:
        """``encoding``: :data:`OTLP_JSON` or :data:`OTLP_PROTO`."""
        self._ffi = ffi = module.ffi
        self._lib = module.lib
        if ffi.sizeof("uev_entry") != _ENTRY.size:
            raise ImportError("the native core's entry layout is not the one expected")
        self._core = ffi.gc(self._lib.uev_core_new(), self._lib.uev_core_free)
        if self._core == ffi.NULL:
            raise MemoryError("the native core")
        self._out = ffi.new("uev_out *")
        self._entries: Any = None
        self._text: Any = None
        self._scopes = ffi.new("uev_scope[]", SCOPES)
        self._layout = ffi.new("uev_layout *")
        self.encoding = encoding

    def clear(self) -> None:
        """Forget every plan."""
        self._lib.uev_core_clear(self._core)

    def set_plan(
        self, event_id: int, kind: int, fields: Sequence[tuple[int, int, int, bool]], needed: int
    ) -> int:
        """Decode records of ``event_id`` natively: ``fields`` (offset, size, kind, signed)
        in the schema's order (core.c). The plan's number, or -1 if the core refuses it
        (its records then go to the Python path)."""
        if not 0 <= event_id <= 0xFFFF or len(fields) > MAX_FIELDS or needed > 0xFFFF + 4:
            return -1
        plan = self._ffi.new("uev_plan *")
        plan.kind, plan.nfields, plan.needed = kind, len(fields), needed
        for i, (offset, size, field_kind, signed) in enumerate(fields):
            if not (0 <= offset <= 0xFFFF and 0 <= size <= 0xFFFF):
                return -1
            field = plan.f[i]
            field.offset, field.size, field.kind, field.is_signed = offset, size, field_kind, signed
        return int(self._lib.uev_core_set(self._core, event_id, plan))

    def decode_pages(
        self, data: bytes, lengths: Sequence[int], layout: tuple[int, int, int]
    ) -> Result:
        """Pages, ``lengths[i]`` bytes each, one after another in ``data``; ``layout``:
        the timestamp, commit and data offsets (:class:`.PageLayout`)."""
        out = self._prepare(data, len(data) // 8 + len(lengths) + 8)
        self._layout.timestamp_offset, self._layout.commit_offset, self._layout.data_offset = layout
        ffi = self._ffi
        self._lib.uev_decode_pages(
            self._core,
            ffi.from_buffer("uint8_t[]", data),
            ffi.new("uint32_t[]", lengths),
            len(lengths),
            self._layout,
            out,
        )
        return self._result(out)

    def decode_records(
        self, data: bytes, lengths: Sequence[int], timestamps: Sequence[int]
    ) -> Result:
        """Records taken outside pages (a perf.data's samples), one after another."""
        out = self._prepare(data, len(lengths) + 8)
        ffi = self._ffi
        self._lib.uev_decode_records(
            self._core,
            ffi.from_buffer("uint8_t[]", data),
            ffi.new("uint32_t[]", lengths),
            ffi.new("uint64_t[]", timestamps),
            len(lengths),
            out,
        )
        return self._result(out)

    def _prepare(self, data: bytes, entries: int) -> Any:
        """The output, its buffers large enough for ``entries`` entries and a text arena
        of 4 bytes of item per byte of input, at most :data:`MAX_TEXT` (a record whose
        item does not fit goes to the Python path)."""
        ffi, out = self._ffi, self._out
        if self._entries is None or len(self._entries) < entries:
            self._entries = ffi.new("uev_entry[]", max(entries, 4096))
        text = min(4 * len(data) + 65536, MAX_TEXT)
        if self._text is None or len(self._text) < text:
            self._text = ffi.new("char[]", text)
        out.entries, out.entries_cap, out.entries_len = self._entries, len(self._entries), 0
        out.text, out.text_cap, out.text_len = self._text, len(self._text), 0
        out.scopes, out.scopes_cap, out.scopes_len = self._scopes, SCOPES, 0
        out.pages = out.missed_pages = out.records = 0
        out.encoding = self.encoding
        return out

    def _result(self, out: Any) -> Result:
        ffi = self._ffi
        entries = bytes(ffi.buffer(out.entries, out.entries_len * _ENTRY.size))
        return Result(
            _ENTRY.iter_unpack(entries),
            ffi.buffer(out.text, out.text_len)[:].decode("ascii")
            if self.encoding == OTLP_JSON
            else ffi.buffer(out.text, out.text_len)[:],
            [(out.scopes[i].off, out.scopes[i].len) for i in range(out.scopes_len)],
            int(out.pages),
            int(out.missed_pages),
            int(out.records),
        )


class CoreChoice(NamedTuple):
    """Which core the reader uses, and why (``--version``, the summary)."""

    core: NativeCore | None
    reason: str


def load_core(encoding: int = OTLP_JSON) -> CoreChoice:
    """The native core (writing ``encoding``), or None and why not (the setting, or what
    failed to load). Raises ImportError if the setting requires it and it cannot load."""
    wanted = os.environ.get(READER_CORE, "auto").strip().lower() or "auto"
    if wanted == "python":
        return CoreChoice(None, f"python ({READER_CORE}=python)")
    if wanted not in ("auto", "native"):
        raise ValueError(f"{READER_CORE}={wanted!r}: auto, native or python")
    try:
        module = importlib.import_module(_MODULE)
        core = NativeCore(module, encoding)
    except (ImportError, OSError, MemoryError) as exc:
        if wanted == "native":
            raise ImportError(
                f"{READER_CORE}=native, but the native core did not load: {exc}"
            ) from exc
        return CoreChoice(None, f"python (the native core did not load: {exc})")
    return CoreChoice(core, "native")
