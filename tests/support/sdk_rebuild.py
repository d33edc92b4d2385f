# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A join_stage for tests that read spans and logs as SDK objects: the join's records built
at once, as an output that needs them builds them (outputs/sdk_objects.py)."""

from __future__ import annotations

from typing import Any

from opentelemetry_exporter_userevents.reader.join.join_stage import JoinStage
from opentelemetry_exporter_userevents.reader.outputs.exporters.sdk_objects import sdk_objects


def built(items: list[Any]) -> list[Any]:
    """``items`` with every JoinedRecord built into its SDK object (none may fail)."""
    objects, failed = sdk_objects(items)
    assert failed == 0, f"{failed} joined records built no SDK object"
    return list(objects)


class SdkRebuilder:
    """A JoinStage whose ``add`` and ``flush`` hand ReadableSpan and ReadableLogRecord.
    It wraps one rather than inheriting: the compiled build's JoinStage is a native class,
    which an interpreted class cannot inherit from."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__["join_stage"] = JoinStage(*args, **kwargs)

    def add(self, records: Any) -> list[Any]:
        return built(self.join_stage.add(records))

    def flush(self) -> list[Any]:
        return built(self.join_stage.flush())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["join_stage"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.join_stage, name, value)
