# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A short job writing as the Rust user_events trace exporter does, for kernel tests:
it registers ``PROVIDER_L4K1`` with EventHeader's fields (single-format), writes one
Common Schema span at once (no waiting for a listener: a short job does not), and exits.

``python -m tests.support.eventheader_writer PROVIDER SPAN_NAME [--wait-listened]``: with
``--wait-listened`` it first waits (up to 60 s) until something listens, as a long-running
service would be found by a reader's rescan. It prints the number of records written.
"""

from __future__ import annotations

import sys
import time

from opentelemetry_exporter_userevents.abi.tracefs import find_tracefs
from opentelemetry_exporter_userevents.abi.user_events import UserEventsData
from tests.reader.decode.eventheader_encoder import event, metadata, payload
from tests.support.eventheader_captures import rust_span

FIELDS = "u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level"
"""As eventheader.h's EVENTHEADER_COMMAND_TYPES (written here, not taken from the reader)."""


def main(provider: str, span_name: str, wait_listened: bool) -> int:
    data = UserEventsData(find_tracefs().path)
    registration = data.register(f"{provider}_L4K1 {FIELDS}", 0)
    if wait_listened:
        deadline = time.monotonic() + 60
        while not registration.enabled and time.monotonic() < deadline:
            time.sleep(0.05)
    specs = rust_span(span_name)
    written = 0
    if registration.enabled:
        registration.write(event(metadata("Span", specs, False), payload(specs, False), False))
        written = 1
    data.close()
    print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], "--wait-listened" in sys.argv[3:]))
