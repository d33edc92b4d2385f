# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's OTLP output through a real collector, on the host (no kernel): ``decode
CAPTURE --exporter otlp_proto_grpc`` (and ``otlp_proto_http``), with and without gzip, sends
an app's spans and logs to rotel (``rotel-agent`` of the ``rotel`` wheel), whose own OTLP
exporter posts them to a sink in this test; metric points go through the same output.
Every span, log and metric point arrives equal to the app's own OTLP encoding, record by
record with its resource and scope (the collector may regroup them).

rotel is a test requirement (.ci/run installs it): where it is missing the test fails and
says so, it does not skip. The same through the kernel, with apps writing:
tests/kernel/test_reader_collector.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import (  # noqa: E402
    encode_metrics,
)

from opentelemetry_exporter_userevents.reader import cli  # noqa: E402
from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage  # noqa: E402
from opentelemetry_exporter_userevents.reader.join.rebuild_metrics import metrics_data  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.output_stage import (  # noqa: E402
    OutputStage,
)
from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_json  # noqa: E402
from opentelemetry_exporter_userevents.reader.outputs.output import ExporterOutput  # noqa: E402
from tests.reader.capture.test_capture import _capture, _encodable, _pages  # noqa: E402
from tests.reader.capture.test_capture import _records as _capture_records  # noqa: E402
from tests.support.collector import MESSAGES, Rotel, Sink, otlp_json_of, running_rotel  # noqa: E402
from tests.support.kernel_support import wait_until  # noqa: E402
from tests.support.otlp import flatten, metric_points  # noqa: E402
from tests.support.span_fixtures import make_logs, make_spans  # noqa: E402
from tests.test_metric_exporter import _collection  # noqa: E402
from tests.test_metric_exporter import _records as _metric_records  # noqa: E402


@pytest.fixture
def sink() -> Iterator[Sink]:
    server = Sink()
    yield server
    server.close()


@pytest.fixture
def collector(sink: Sink, tmp_path: Path) -> Iterator[Rotel]:
    with running_rotel(sink, tmp_path / "rotel.log") as rotel:
        yield rotel


@pytest.mark.parametrize("compression", ["none", "gzip"])
@pytest.mark.parametrize("exporter", ["otlp_proto_grpc", "otlp_proto_http"])
def test_every_record_reaches_a_real_collectors_exporter_as_the_app_encoded_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sink: Sink,
    collector: Rotel,
    exporter: str,
    compression: str,
) -> None:
    for name in ("ENDPOINT", "HEADERS", "COMPRESSION", "TIMEOUT", "INSECURE"):
        for signal in ("", "TRACES_", "LOGS_", "METRICS_"):
            monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{signal}{name}", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", raising=False)
    url = collector.grpc_url if exporter == "otlp_proto_grpc" else collector.url
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    if compression != "none":  # the gRPC exporter takes gzip or nothing
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)

    spans, logs, raws = _capture_records(
        _encodable(make_spans(), otlp_json.spans_request),
        _encodable(make_logs(), otlp_json.logs_request),
    )
    capture = _capture(tmp_path, _pages(raws))
    assert cli.main(["decode", capture, "--exporter", exporter]) == 0
    err = capsys.readouterr().err
    points = JoinStage().add(_metric_records(_collection()))
    stage = OutputStage(ExporterOutput(exporter), stop_timeout=30)
    stage.write(points)
    stage.close()
    assert stage.failed == 0 and not stage.parts(), stage.parts()

    want_spans = flatten([otlp_json.spans_request(spans)], "spans")
    want_logs = flatten([otlp_json.logs_request(logs)], "logs")
    want_points = metric_points([otlp_json_of(encode_metrics(metrics_data(points)))])
    assert len(want_spans) == len(spans) > 0 and len(want_logs) == len(logs) > 0
    assert sum(map(len, want_points.values())) == len(points) > 0

    def arrived() -> bool:
        return (
            len(flatten(sink.got("/v1/traces"), "spans")) >= len(want_spans)
            and len(flatten(sink.got("/v1/logs"), "logs")) >= len(want_logs)
            and sum(map(len, metric_points(sink.got("/v1/metrics")).values())) >= len(points)
        )

    arrived_in_time = wait_until(arrived, 60)
    assert sink.errors == []
    assert arrived_in_time, (err, {path: len(sink.got(path)) for path in MESSAGES})
    # record by record, each with its resource and scope as the app encoded them
    assert flatten(sink.got("/v1/traces"), "spans") == want_spans
    assert flatten(sink.got("/v1/logs"), "logs") == want_logs
    assert metric_points(sink.got("/v1/metrics")) == want_points
    assert "not written" not in err and "dropped" not in err and "not delivered" not in err, err
