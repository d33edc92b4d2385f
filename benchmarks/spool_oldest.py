# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What ``Spool.oldest()`` costs at the spool's bound of 65,536 segments (issue 44: it
scanned every segment number on each call, 2.7 ms a call; the oldest is now the head of an
index kept in memory).

    .venv/bin/python benchmarks/spool_oldest.py [--segments N] [--calls N]

Makes N one-record segments in a temporary directory (as a reader of the version before
left them, in DIR itself: taken over at start), then times ``oldest()`` (which reads the
oldest segment, its checksum checked) and ``oldest()`` + ``remove()`` (a segment re-sent
and deleted, the directory ``fsync``-ed)."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import zlib

from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.spool import (
    HEADER,
    MAGIC,
    MAX_SEGMENTS,
    Spool,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=MAX_SEGMENTS)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="spool-oldest-")
    try:
        os.chmod(directory, 0o700)
        segment = HEADER.pack(MAGIC, 1, 1, 0, 1, 0, zlib.crc32(b""))
        for number in range(1, args.segments + 1):
            with open(os.path.join(directory, f"{number:016d}.seg"), "wb") as file:
                file.write(segment)
        started = time.perf_counter()
        spool = Spool(directory, 1 << 40)
        taken_over = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(args.calls):
            spool.oldest()
        oldest = (time.perf_counter() - started) / args.calls
        started = time.perf_counter()
        for _ in range(args.calls):
            found = spool.oldest()
            assert found is not None
            spool.remove(found, found.records)
        removed = (time.perf_counter() - started) / args.calls
        print(
            f"{args.segments} segments: taken over in {taken_over:.2f} s; oldest() "
            f"{oldest * 1e6:.0f} us a call; oldest() + remove() {removed * 1e6:.0f} us"
        )
        spool.close()
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
