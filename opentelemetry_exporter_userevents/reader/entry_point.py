# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``otel-userevents``'s entry point: the stop signals' handlers are its first instructions
(:mod:`.stop_early`), before the command line's modules load. It imports only ``signal``
and ``sys`` before them, so the window without handlers is the interpreter's own start.
"""

from __future__ import annotations

import sys

from opentelemetry_exporter_userevents.reader.stop_early import (
    StoppedEarly,
    honour_stop_signals,
    said,
)


def main() -> int:
    """The handlers, then the command line (imported now: tens of milliseconds on a host,
    seconds in an emulated guest)."""
    honour_stop_signals()
    try:
        from opentelemetry_exporter_userevents.reader import cli  # noqa: PLC0415
    except (KeyboardInterrupt, StoppedEarly) as stopped:
        return said(stopped)
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
