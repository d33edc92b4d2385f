# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The whole path on one host: examples/app.py writes spans and logs as user_events, and
``otel-userevents record`` reads them back and prints them as trace trees and log lines.

Run as root on a kernel with user_events (or in the test bed: see README.rst). With
``--kernel``, the reader records every prefix (``--prefix '*'``: the app announces itself,
so its process is watched before its first span) with ``--kernel sched,syscalls``, and each
span shows what the kernel did for its thread.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    kernel = ["--prefix", "*", "--kernel", "sched,syscalls"] if "--kernel" in sys.argv else []
    with tempfile.TemporaryDirectory() as scratch:
        ready = os.path.join(scratch, "ready")
        reader = subprocess.Popen(
            [sys.executable, "-m", "opentelemetry_exporter_userevents.reader.cli", "record",
             "--format", "tree", "--ready-file", ready, *kernel],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        while not os.path.exists(ready) and reader.poll() is None:
            time.sleep(0.05)
        if reader.poll() is not None:  # it could not start: say why
            sys.stderr.write(reader.stderr.read())
            return reader.returncode
        print("otel-userevents is recording; running examples/app.py", flush=True)
        app = [sys.executable, os.path.join(HERE, "app.py"), "--count", "3", "--interval", "0.1"]
        subprocess.run([*app, "--wait-for-listener", "10"], check=True)
        time.sleep(1.0)  # the reader polls every 0.2 s
        reader.send_signal(signal.SIGINT)
        out, err = reader.communicate(timeout=60)
        print(out, end="")
        print(err, end="", file=sys.stderr)
        return reader.returncode


if __name__ == "__main__":
    sys.exit(main())
