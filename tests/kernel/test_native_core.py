# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Where the kernel tests run (the qemu guest, which sees the host's checkout read-only, or
natively), the reader loads the native core that the editable install built in place
(docs/building.md), unless the session asks for the Python path
(``OTEL_EXPORTER_USER_EVENTS_READER_CORE=python``, which the test bed passes on)."""

from __future__ import annotations

import os

import pytest

from opentelemetry_exporter_userevents.reader.native.native_core import READER_CORE, load_core

pytestmark = pytest.mark.kernel


def test_the_reader_loads_the_checkouts_native_core():
    choice = load_core()
    if os.environ.get(READER_CORE, "").strip().lower() == "python":
        assert choice.core is None and choice.reason == f"python ({READER_CORE}=python)"
    else:
        assert choice.core is not None, f"the reader's core here: {choice.reason}"
        assert choice.reason == "native"
