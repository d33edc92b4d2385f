# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A short job writing as the Rust and .NET metric exporters do, for kernel tests: it
registers ``otlp_metrics`` with their fields (single-format), writes one record per
sample point at once (protocol 0, version ``v0.19.00``, the OTLP request behind the
buffer's ``__rel_loc``), and exits.

``python -m tests.support.otlp_metrics_writer [--wait-listened]``: with
``--wait-listened`` it first waits (up to 60 s) until something listens. It prints the
number of records written.
"""

from __future__ import annotations

import sys
import time

from opentelemetry_exporter_userevents.abi.tracefs import find_tracefs
from opentelemetry_exporter_userevents.abi.user_events import UserEventsData
from tests.support.otlp_metrics_captures import payload, sample_requests

COMMAND = "otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer;"
"""As opentelemetry-user-events-metrics registers it (its trailing ``;`` included)."""


def main(wait_listened: bool) -> int:
    data = UserEventsData(find_tracefs().path)
    registration = data.register(COMMAND, 0)
    if wait_listened:
        deadline = time.monotonic() + 60
        while not registration.enabled and time.monotonic() < deadline:
            time.sleep(0.05)
    written = 0
    for buffer in sample_requests():
        if registration.enabled:  # as the producers check before they write
            registration.write(payload(buffer))
            written += 1
    data.close()
    print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main("--wait-listened" in sys.argv[1:]))
