# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents`` on a disk that stalls, for the collector load benchmark's ``stalled
disk`` scenario: ``python benchmarks/stalling_disk.py STALL_FILE record ...``.

The test bed has no block layer (its root is 9p; no FUSE, no device mapper), so the stall
is emulated in the reader's process: every ``os.fsync`` waits while ``STALL_FILE`` exists,
as a write-back that does not complete holds ``fsync`` (the spool's segments are written,
``fsync``-ed, then renamed into place: the first ``fsync`` under a stall holds the writer).
Then the command runs as ``otel-userevents`` would run it.
"""

from __future__ import annotations

import os
import runpy
import sys
import time

POLL = 0.05
"""Seconds between two looks at the stall file."""


def main() -> None:
    stall_file, args = sys.argv[1], sys.argv[2:]
    real_fsync = os.fsync

    def stalling_fsync(fd: int) -> None:
        while os.path.exists(stall_file):
            time.sleep(POLL)
        real_fsync(fd)

    os.fsync = stalling_fsync
    sys.argv = ["otel-userevents", *args]
    runpy.run_module("opentelemetry_exporter_userevents.reader.cli", run_name="__main__")


if __name__ == "__main__":
    main()
