# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The ``otlp_metrics`` tracepoint as the kernel holds it, for host tests of the reader's
third record format: its ``format`` file as Linux prints one for the producers'
registration, whole records (common fields, protocol, version, the buffer behind its
``__rel_loc``), and OTLP requests made by the SDK's own OTLP encoder from the SDK's own
metric data, one point per request as the Rust and .NET exporters write them."""

from __future__ import annotations

import struct

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk.metrics import Exemplar
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Buckets,
    ExponentialHistogram,
    ExponentialHistogramDataPoint,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from tests.support.captures import COMMON
from tests.support.pages import record

VERSION = b"v0.19.00"
"""What both producers write in ``version`` (written here, not taken from the reader)."""
START_NS = 1752228000_000000000
TIME_NS = 1752228010_500000000
RESOURCE = Resource({"service.name": "inventory", "service.instance.id": "pod-3"})
SCOPE = InstrumentationScope("inventory.meter", "1.2.0", None, {"team": "stock"})


def otlp_metrics_format(event_id: int) -> str:
    """``events/user_events/otlp_metrics/format``: Linux moves an array's brackets after
    the name, and ``__rel_loc`` keeps them as an array of unknown length."""
    return "\n".join([
        "name: otlp_metrics", f"ID: {event_id}", "format:", COMMON,
        "\tfield:u32 protocol;\toffset:8;\tsize:4;\tsigned:0;",
        "\tfield:char version[];\toffset:12;\tsize:8;\tsigned:1;",
        "\tfield:__rel_loc u8 buffer[];\toffset:20;\tsize:4;\tsigned:0;",
        "", 'print fmt: "protocol=%u", REC->protocol', "",
    ])  # fmt: skip


def payload(buffer: bytes, protocol: int = 0, version: bytes = VERSION) -> bytes:
    """What a producer writes after the common fields: the buffer right after its
    ``__rel_loc`` (offset 0, size in the high 16 bits)."""
    return struct.pack("<I8sI", protocol, version, len(buffer) << 16) + buffer


def otlp_metrics_record(event_id: int, buffer: bytes, pid: int = 4343, **kw) -> bytes:
    return record(event_id, payload(buffer, **kw), pid)


def _request(metric: Metric) -> bytes:
    data = MetricsData([ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, [metric], "")], "")])
    return encode_metrics(data).SerializeToString()


def sample_metrics() -> list[Metric]:
    """A point of each kind the producers write: an int counter, a double gauge, an
    explicit histogram with an exemplar, an exponential histogram."""
    cumulative = AggregationTemporality.CUMULATIVE
    exemplar = Exemplar({"shelf": "b"}, 7.5, TIME_NS - 5, 0x1F2E3D4C5B6A7988,
                        0x5B8EFFF798038103D269B633813FC60C)  # fmt: skip
    return [
        Metric("items.sold", "Items sold", "{item}", Sum(
            [NumberDataPoint({"store": "north", "open": True}, START_NS, TIME_NS, 42)],
            cumulative, True)),
        Metric("stock.level", "", "1", Gauge(
            [NumberDataPoint({"sku": ["a", "b"]}, 0, TIME_NS, 12.25)])),
        Metric("pick.duration", "Pick time", "ms", Histogram(
            [HistogramDataPoint({"zone": 4}, START_NS, TIME_NS, 3, 16.5, (1, 2, 0),
                                (5.0, 10.0), 2.5, 9.0, [exemplar])],
            AggregationTemporality.DELTA)),
        Metric("queue.wait", "", "s", ExponentialHistogram(
            [ExponentialHistogramDataPoint({}, START_NS, TIME_NS, 4, 3.25, 2, 1,
                                           Buckets(-1, [1, 2]), Buckets(0, [1]), 0,
                                           -0.5, 2.0)],
            cumulative)),
    ]  # fmt: skip


def sample_requests() -> list[bytes]:
    """One request per point, as the producers split them."""
    return [_request(metric) for metric in sample_metrics()]
