# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""OTLP protobuf written straight from checked records is, byte for byte, what the OTLP
exporters' encoder serializes (``encode_spans(...).SerializeToString()``, and the logs
encoder's) for the SDK objects the join_stage builds from the same records."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import example, given, settings
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource

from opentelemetry_exporter_userevents.reader.decode.checked_records import (
    CheckedEvent,
    CheckedLink,
    CheckedLog,
    CheckedScope,
    CheckedSpan,
)
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinedRecord, JoinStage
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_proto_direct
from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_objects import sdk_object
from tests.reader.outputs.test_otlp_json_direct import _quiet, batches, checked_logs, checked_spans


def _encoded_or_none(encode: Callable[[Sequence[Any]], Any], items: Sequence[Any]) -> Any:
    try:
        return encode(items)
    except Exception:  # noqa: BLE001 - the encoder raises bare Exception for unknown types
        return None


def _sdk_path(batch: list[JoinedRecord]) -> tuple[bytes | None, int]:
    """The encoder's bytes for the SDK objects of the records it can encode (it refuses a
    batch with one it cannot; the direct path leaves that one out and counts it)."""
    spans = isinstance(batch[0].checked, CheckedSpan)
    encode = encode_spans if spans else encode_logs
    built: list[Any] = [sdk_object(joined) for joined in batch]
    good = [item for item in built if _encoded_or_none(encode, [item]) is not None]
    if not good:
        return None, len(built)
    return encode(good).SerializeToString(), len(built) - len(good)


def _direct_path(batch: list[JoinedRecord]) -> tuple[bytes | None, int]:
    if isinstance(batch[0].checked, CheckedSpan):
        return otlp_proto_direct.spans_request(batch)
    return otlp_proto_direct.logs_request(batch)


def _same(batch: list[JoinedRecord]) -> None:
    with _quiet():
        want, want_failed = _sdk_path(batch)
        got, got_failed = _direct_path(batch)
    assert got_failed == want_failed
    assert (got is None) == (want is None)
    if want is not None:
        assert got is not None
        request = (
            ExportTraceServiceRequest
            if isinstance(batch[0].checked, CheckedSpan)
            else ExportLogsServiceRequest
        )
        assert request.FromString(got) == request.FromString(want)  # the same message
        assert got == want  # the same bytes, field order included


def _span(**fields: Any) -> CheckedSpan:
    defaults: dict[str, Any] = dict(
        trace_id=1,
        span_id=2,
        parent_span_id=None,
        parent_is_remote=False,
        trace_flags=1,
        trace_state=(),
        name="GET /cart/{id}",
        kind=1,
        status_code=0,
        status_description="",
        start_time_ns=1_700_000_000_000_000_000,
        end_time_ns=1_700_000_000_000_100_000,
        attributes={"http.request.method": "GET", "url.path": "/cart/1", "user.id": 1},
        dropped_attributes=0,
        events=[CheckedEvent("cart loaded", 1_700_000_000_000_050_000, {"items": 3}, 0)],
        dropped_events=0,
        links=[],
        dropped_links=0,
        scope_text="",
        scope=None,
    )
    defaults.update(fields)
    return CheckedSpan(**defaults)


def _log(**fields: Any) -> CheckedLog:
    defaults: dict[str, Any] = dict(
        time_ns=1_700_000_000_000_000_000,
        observed_time_ns=1_700_000_000_000_000_001,
        trace_id=0,
        span_id=0,
        trace_flags=0,
        severity_number=9,
        severity_text="INFO",
        event_name=None,
        body="cart loaded",
        attributes={"url.path": "/cart/1", "user.id": 1},
        dropped_attributes=0,
        scope_text="",
        scope=None,
    )
    defaults.update(fields)
    return CheckedLog(**defaults)


def _joined(*checked: Any, resource: Resource | None = None, scope: Any = None) -> list[Any]:
    resource = resource if resource is not None else Resource({"service.name": "bench"})
    return [JoinedRecord(c, resource, scope) for c in checked]


_SCOPE = JoinStage().scope("s", CheckedScope("bench", "1.0", "https://s", {"a": [1, "x"]}))
_LONG = "x" * 300  # lengths past one varint byte


@pytest.mark.parametrize(
    "batch",
    [
        _joined(_span()),
        _joined(_span(), _span(span_id=3), scope=_SCOPE),
        _joined(_span(name=_LONG, attributes={_LONG: _LONG, "k": -1, "f": -0.0, "b": b""})),
        _joined(
            _span(
                parent_span_id=0,
                parent_is_remote=True,
                trace_state=(("a", "1"), ("t@b", "x.y")),
                status_code=2,
                status_description="boom",
                links=[CheckedLink(5, 6, 1, (("v", "1"),), True, {"x": None}, 2)],
                dropped_attributes=300,
                dropped_events=1,
                dropped_links=2**32 - 1,
                kind=4,
            )
        ),
        _joined(_span(status_code=1), resource=Resource({"k": [{"": 1, "z": []}]}, "https://r")),
        _joined(_span(name="\ud800")),  # a lone surrogate: the record is left out
        _joined(_span(), _span(name="\ud800"), _span(span_id=9)),
        _joined(_log()),
        _joined(_log(body=None, trace_id=7, span_id=8, trace_flags=1, event_name="e")),
        _joined(_log(body=2**64), _log(body={"": [1.5, {"a": b"\x00"}], "k": None})),
        _joined(_log(body=[2**64]), _log(severity_text="", severity_number=0, time_ns=0)),
    ],
)
def test_examples_equal_the_encoders(batch: list[JoinedRecord]) -> None:
    _same(batch)


@settings(max_examples=400, deadline=None)
@given(batches(checked_spans()))
@example(_joined(_span()))
def test_spans_equal_the_encoders(batch: list[JoinedRecord]) -> None:
    _same(batch)


@settings(max_examples=400, deadline=None)
@given(batches(checked_logs()))
@example(_joined(_log()))
def test_logs_equal_the_encoders(batch: list[JoinedRecord]) -> None:
    _same(batch)


def test_a_resource_that_cannot_be_carried_fails_its_records_only() -> None:
    bad = Resource({"service.name": "a"}, "\ud800")
    batch = _joined(_span(), resource=bad) + _joined(_span(span_id=5))
    _same(batch)
    data, failed = otlp_proto_direct.spans_request(batch)
    assert failed == 1 and data is not None
    request = ExportTraceServiceRequest.FromString(data)
    assert [len(r.scope_spans[0].spans) for r in request.resource_spans] == [1]


def test_the_cache_gives_the_same_bytes() -> None:
    cache = otlp_proto_direct.RequestCache()
    batch = _joined(_span(), scope=_SCOPE) + _joined(_span(span_id=4))
    first = otlp_proto_direct.spans_request(batch, cache)
    assert otlp_proto_direct.spans_request(batch, cache) == first
    assert first == otlp_proto_direct.spans_request(batch)


def test_a_value_past_its_field_fails_its_record_only() -> None:
    """Checks keep such values out; were one to pass, its record alone is left out."""
    batch = _joined(_span(start_time_ns=2**64), _span(kind=7), _span(trace_id=2**128), _span())
    data, failed = otlp_proto_direct.spans_request(batch)
    assert failed == 3
    assert data == otlp_proto_direct.spans_request(batch[3:])[0]


def test_the_key_fields_kept_are_bounded_whatever_the_keys(monkeypatch) -> None:
    monkeypatch.setattr(otlp_proto_direct, "MAX_KEYS", 8)
    monkeypatch.setattr(otlp_proto_direct, "_KEYS", {})
    for n in range(50):  # a hostile writer: new attribute keys in every span
        _same(_joined(_span(attributes={f"k{n}": n, "same": 1})))
        assert len(otlp_proto_direct._KEYS) <= 8
