# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The single-format layout on real kernels: the fallback where MULTI_FORMAT is refused (Linux
6.4 to 6.8, and the bzImage-no-multi-format test image), the setting that asks for it on any
kernel, versioned names that let two schema versions write side by side, and a name held by
another program's format. Each test asserts what the kernel it runs on must give."""

from __future__ import annotations

import errno
import logging
import struct
from collections.abc import Callable
from typing import Any

import pytest

from opentelemetry_exporter_userevents import UserEventsSpanExporter, UserEventsSpanProcessor
from opentelemetry_exporter_userevents.abi import (
    USER_EVENT_REG_MULTI_FORMAT,
    USER_EVENTS_MULTI_SYSTEM,
    USER_EVENTS_SYSTEM,
    Registration,
    Tracefs,
    UserEventsError,
    uapi,
)
from opentelemetry_exporter_userevents.record.schema import SPAN, Field, Schema
from opentelemetry_exporter_userevents.record.tracepoints import commands, single_format_name
from tests.support.kernel_support import PerfTracepoint
from tests.support.records import check_span
from tests.support.span_fixtures import make_spans

pytestmark = pytest.mark.kernel

_WORDS: list[object] = []  # enable words the kernel may write until the test's fd closes


def _fresh_word() -> int:
    word = uapi.ffi.new("uint64_t *")
    _WORDS.append(word)
    return int(uapi.ffi.cast("uintptr_t", word))


def _read_back(
    tracefs: Tracefs, registration: Registration, schema: Schema, write: Callable[[], None]
) -> list[dict[str, Any]]:
    """Run ``write`` while perf listens to ``registration``'s tracepoint; the records the
    kernel took, decoded by that tracepoint's own format file."""
    assert registration.tracepoint is not None
    fmt = tracefs.read_format(registration.system, registration.tracepoint)
    perf = PerfTracepoint(fmt.id)
    try:
        write()
        samples = perf.samples()
    finally:
        perf.close()
    return [schema.unpack(raw, fmt) for raw in samples]


def _assert_layout(
    registration: Registration, tracefs: Tracefs, base: str, schema: Schema, single: bool
) -> None:
    if single:
        assert registration.system == USER_EVENTS_SYSTEM
        assert registration.tracepoint == single_format_name(base, schema)
    else:
        assert registration.system == USER_EVENTS_MULTI_SYSTEM
        assert registration.tracepoint is not None
        assert registration.tracepoint.startswith(f"{base}.")
    assert registration.tracepoint is not None
    fmt = tracefs.read_format(registration.system, registration.tracepoint)
    expected = [(f.name, struct.calcsize("<" + f.struct_code)) for f in schema.fields]
    assert [(f.name, f.size) for f in fmt.fields] == expected


def _spans_read_back_exactly(exporter: UserEventsSpanExporter, tracefs: Tracefs) -> None:
    written: list[Any] = []
    assert exporter.registration is not None
    records = _read_back(
        tracefs,
        exporter.registration,
        SPAN,
        lambda: written.extend(make_spans(UserEventsSpanProcessor(exporter))),
    )
    assert len(records) == len(written) == 2
    by_id = {record["span_id"]: record for record in records}
    for span in written:
        check_span(by_id[f"{span.context.span_id:016x}"], span, records[0]["resource_id"])


def test_multi_format_is_refused_with_einval_exactly_where_the_kernel_predates_it(
    data, event_name, kernel_has_multi_format
):
    command = f"{event_name} u32 a"
    if kernel_has_multi_format:
        registration = data.register(command, USER_EVENT_REG_MULTI_FORMAT)
        assert registration.system == USER_EVENTS_MULTI_SYSTEM and data.multi_format is True
        return
    with pytest.raises(UserEventsError) as refused:  # the raw ioctl, as the kernel answers
        uapi.register_ioctl(data.fd, command, USER_EVENT_REG_MULTI_FORMAT, _fresh_word(), 0)
    assert refused.value.errno == errno.EINVAL
    registration = data.register(command, USER_EVENT_REG_MULTI_FORMAT)
    assert registration.system == USER_EVENTS_SYSTEM and data.multi_format is False
    assert registration.tracepoint == event_name


def test_exporter_takes_the_layout_the_kernel_has_and_its_spans_arrive_exactly(
    prefix, tracefs, kernel_has_multi_format
):
    exporter = UserEventsSpanExporter(prefix=prefix)
    try:
        assert exporter.registration is not None
        single = not kernel_has_multi_format
        _assert_layout(exporter.registration, tracefs, f"{prefix}_span", SPAN, single)
        _spans_read_back_exactly(exporter, tracefs)
    finally:
        exporter.shutdown()


@pytest.mark.parametrize("how", ["keyword", "environment"])
def test_multi_format_false_gives_the_single_format_layout_on_any_kernel(
    prefix, tracefs, how, monkeypatch
):
    if how == "keyword":
        exporter = UserEventsSpanExporter(prefix=prefix, multi_format=False)
    else:
        monkeypatch.setenv("OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT", "false")
        exporter = UserEventsSpanExporter(prefix=prefix)
    try:
        assert exporter.registration is not None
        _assert_layout(exporter.registration, tracefs, f"{prefix}_span", SPAN, single=True)
        _spans_read_back_exactly(exporter, tracefs)
    finally:
        exporter.shutdown()


_NEXT_VERSION = Schema(
    "otel_span",
    [*SPAN.fixed, Field("retries", "u32", "A field a later release might add."), *SPAN.texts],
    "A later version of the span schema, with one more fixed field.",
)


@pytest.mark.parametrize("multi_format", [True, False], ids=["default", "single-format"])
def test_two_schema_versions_of_one_prefix_write_side_by_side(
    prefix, tracefs, data, multi_format, kernel_has_multi_format
):
    """Another release's span schema (one more field) registered beside this one's, as that
    release would register it: each tracepoint keeps its own format and both are read back
    field by field."""
    base = f"{prefix}_span"
    multi, single = commands(base, _NEXT_VERSION)
    flags = USER_EVENT_REG_MULTI_FORMAT if multi_format else 0
    other = data.register(multi if multi_format else single, flags, single_format_command=single)
    exporter = UserEventsSpanExporter(prefix=prefix, multi_format=multi_format)
    try:
        assert exporter.registration is not None
        single_layout = not (multi_format and kernel_has_multi_format)
        _assert_layout(exporter.registration, tracefs, base, SPAN, single_layout)
        _assert_layout(other, tracefs, base, _NEXT_VERSION, single_layout)
        assert other.tracepoint != exporter.registration.tracepoint
        values = [7, 8, 1, 42, b"1" * 32, b"2" * 16, b"0" * 16, 0, 0, 0, 1, 2, 1, 0, 0, 5]
        later = _read_back(
            tracefs,
            other,
            _NEXT_VERSION,
            lambda: other.write(
                _NEXT_VERSION.pack(values, [b"next", b"", b"", b"{}", b"[]", b"[]", b"{}"])
            ),  # fmt: skip
        )
        assert [(r["name"], r["retries"], r["trace_id"]) for r in later] == [("next", 5, "1" * 32)]
        _spans_read_back_exactly(exporter, tracefs)
    finally:
        exporter.shutdown()


def test_a_name_held_by_another_programs_format_is_warned_once_and_counted(
    prefix, tracefs, data, caplog
):
    """A foreign program registered our exact single-format name with other fields first:
    the exporter says so once, naming that format as tracefs shows it, and counts each span
    it cannot write. The legacy unversioned name (what releases before versioned names
    registered) held with other fields does not get in the way."""
    base = f"{prefix}_span"
    data.register(f"{single_format_name(base, SPAN)} u32 foreign; u64 other", 0)
    data.register(f"{base} u32 legacy", 0)
    caplog.set_level(logging.WARNING)
    exporter = UserEventsSpanExporter(prefix=prefix, multi_format=False)
    try:
        assert exporter.registration is None
        warnings = [r.getMessage() for r in caplog.records if "held by another" in r.getMessage()]
        assert len(warnings) == 1
        assert f"user_events/{single_format_name(base, SPAN)}" in warnings[0]
        assert "u32 foreign; u64 other" in warnings[0]
        exporter.export(make_spans())
        assert exporter.stats.dropped_unregistered == 2
        assert exporter.stats.written == 0
    finally:
        exporter.shutdown()
