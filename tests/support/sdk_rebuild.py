# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A rebuilder for tests that read spans and logs as SDK objects: the join's records built
at once, as an output that needs them builds them (outputs/sdk_objects.py)."""

from __future__ import annotations

from typing import Any

from opentelemetry_exporter_userevents.reader.join.rebuild import Rebuilder
from opentelemetry_exporter_userevents.reader.outputs.sdk_objects import sdk_objects


def built(items: list[Any]) -> list[Any]:
    """``items`` with every JoinedRecord built into its SDK object (none may fail)."""
    objects, failed = sdk_objects(items)
    assert failed == 0, f"{failed} joined records built no SDK object"
    return list(objects)


class SdkRebuilder(Rebuilder):
    """A Rebuilder whose ``add`` and ``flush`` hand ReadableSpan and ReadableLogRecord."""

    def add(self, records: Any) -> list[Any]:  # type: ignore[override]
        return built(super().add(records))

    def flush(self) -> list[Any]:  # type: ignore[override]
        return built(super().flush())
