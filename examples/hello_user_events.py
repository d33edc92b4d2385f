# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Register a user_events tracepoint, listen to it, write one record and read it back.

Run it as root on a kernel with CONFIG_USER_EVENTS, or in the test bed's guest:

    USER_EVENTS_KERNEL=path/to/bzImage python -m testbed -- python examples/hello_user_events.py
"""

import os
import struct
import sys
import time

from opentelemetry_exporter_userevents.abi import UserEventsData
from opentelemetry_exporter_userevents.abi.uapi import rel_loc

COMMAND = "hello_user_events u64 start_time_ns; __rel_loc char[] name"


def main() -> int:
    data = UserEventsData()
    if not data.available:
        print(f"user_events is not available here: {data.reason}", file=sys.stderr)
        return 1
    with data:
        event = data.register(COMMAND)
        print(f"registered {event.system}/{event.tracepoint} (write index {event.write_index})")
        print(f"enabled before a listener attaches: {event.enabled}")

        # A listener of our own: a tracefs instance, so the global buffer is left alone.
        instance = os.path.join(data.tracefs.path, "instances", f"hello_{os.getpid()}")
        os.mkdir(instance)
        try:
            data.tracefs.set_enabled(
                event.system, event.tracepoint, True, os.path.basename(instance)
            )
            print(f"enabled after a listener attaches: {event.enabled}")
            if event.enabled:  # the check every writer makes before serializing anything
                name = b"hello from Python\0"
                payload = struct.pack("<QI", time.time_ns(), rel_loc(len(name), 0)) + name
                print(f"wrote {event.write(payload)} bytes")
            with open(os.path.join(instance, "trace")) as trace:
                lines = [line.rstrip() for line in trace if event.tracepoint in line]
            print("the kernel's trace shows:")
            print("\n".join("  " + line.strip() for line in lines))
            data.tracefs.set_enabled(
                event.system, event.tracepoint, False, os.path.basename(instance)
            )
        finally:
            os.rmdir(instance)
        print(f"enabled after the listener detaches: {event.enabled}")
    return 0 if lines else 1


if __name__ == "__main__":
    sys.exit(main())
