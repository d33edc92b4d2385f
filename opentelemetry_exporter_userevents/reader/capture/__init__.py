# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Capture files: trace-cmd's trace.dat and perf's perf.data, read (and trace.dat written)
so that spans and logs recorded by familiar tools can be rebuilt later."""

from opentelemetry_exporter_userevents.reader.capture.decode import (
    DecodedCapture,
    batches,
    decode_file,
)
from opentelemetry_exporter_userevents.reader.capture.trace_dat import TraceDatWriter
from opentelemetry_exporter_userevents.reader.capture.tracing_data import CaptureError

__all__ = ["CaptureError", "DecodedCapture", "TraceDatWriter", "batches", "decode_file"]
