# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``decode`` with the native core and with the Python path: the same OTLP/JSON lines, byte
for byte, and the same summary but for the core it names, for a trace.dat and a perf.data,
in-process and with workers; the same OTLP/HTTP requests to a collector; the tree view says
it took the Python path."""

from __future__ import annotations

import io
import os
import re

import pytest

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.commands import capture as capture_command
from opentelemetry_exporter_userevents.reader.commands import common
from opentelemetry_exporter_userevents.reader.native import native_core
from opentelemetry_exporter_userevents.reader.pipeline import decode_stage
from tests.reader.capture.test_capture import FORMATS, _capture, _pages, _records
from tests.reader.outputs.test_otlp_http_output import Receiver, receiver  # noqa: F401
from tests.support.captures import perf_data, perf_sample
from tests.support.span_fixtures import make_logs, make_spans

if os.environ.get(native_core.READER_CORE, "").strip().lower() == "python":
    pytest.skip("the pure build's run: no native core", allow_module_level=True)


def _decode(path: str, core: str, *flags: str) -> tuple[str, str]:
    saved = common._CORE
    common._CORE = native_core.CoreChoice(None, f"python ({native_core.READER_CORE}=python)")
    if core == "native":
        common._CORE = native_core.load_core()
        assert common._CORE.core is not None, "the native core did not load"
    try:
        out, err = io.StringIO(), io.StringIO()
        args = cli.parser().parse_args(["decode", path, *flags])
        assert capture_command.decode(args, out, err) == 0, err.getvalue()
    finally:
        common._CORE = saved
    return out.getvalue(), re.sub(r" in [0-9.]+ s", "", err.getvalue())


def _files(tmp_path) -> list[str]:
    spans = make_spans() * 40  # ...and ids that repeat: the join takes them all the same
    _, _, raws = _records(spans, make_logs() * 40)
    trace_dat = _capture(tmp_path, _pages(raws))
    samples = [perf_sample(raw, 1000 + n) for n, raw in enumerate(raws)]
    perf = tmp_path / "perf.data"
    perf.write_bytes(perf_data(FORMATS, samples))
    return [trace_dat, str(perf)]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_decode_writes_the_same_with_either_core(tmp_path, monkeypatch, workers):
    monkeypatch.setattr(decode_stage, "WORKERS_FROM", 0)
    for path in _files(tmp_path):
        native_out, native_err = _decode(path, "native", "--workers", workers)
        python_out, python_err = _decode(path, "python", "--workers", workers)
        assert native_out == python_out and native_out.count("\n") >= 2
        assert native_err.endswith(", native core\n"), native_err
        assert python_err.endswith(f", Python core ({native_core.READER_CORE}=python)\n")
        assert native_err.rsplit(", ", 1)[0] == python_err.rsplit(", ", 1)[0]


def test_decode_to_a_collector_sends_the_same_requests_with_either_core(
    tmp_path,
    receiver: Receiver,  # noqa: F811 - the fixture
):
    """``--exporter otlp_proto_http``: the direct sender's requests, byte for byte (the
    native core writes each span's and log's protobuf field)."""
    for path in _files(tmp_path):
        sent = []
        for core in ("native", "python"):
            receiver.requests.clear()
            _, err = _decode(path, core, "--exporter", "otlp_proto_http")
            sent.append((sorted(body for _, _, body in receiver.requests), err))
        (native_sent, native_err), (python_sent, python_err) = sent
        assert native_sent == python_sent and len(native_sent) >= 2
        assert native_err.endswith(", native core\n"), native_err
        assert native_err.rsplit(", ", 1)[0] == python_err.rsplit(", ", 1)[0]


def test_the_tree_view_takes_the_python_path_and_says_so(tmp_path):
    _, err = _decode(_files(tmp_path)[0], "native", "--format", "tree")
    assert err.endswith(", Python core\n"), err
