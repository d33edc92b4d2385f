# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A smoke check of an installed compiled wheel, run from outside the checkout (cibuildwheel's
test-command for each wheel of a release, and .ci/run for CI's): every module
pyproject.toml's mypyc hook lists is imported as an extension module, a value comes back
exact through the compiled value encoding, and the compiled span encoder encodes a span.
The whole test suite runs against the x86_64 wheel in CI (docs/building.md)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opentelemetry_exporter_userevents._export.span_encoder import encode_span
from opentelemetry_exporter_userevents.record import anyvalue

SUPPORT = Path(__file__).resolve().parent.parent / "tests" / "support" / "builds.py"


def listed_modules() -> list[str]:
    """The modules pyproject.toml's mypyc hook lists, read by tests/support/builds.py,
    loaded by its path: the checkout on sys.path would shadow the installed wheel."""
    spec = importlib.util.spec_from_file_location("_builds", SUPPORT)
    assert spec is not None and spec.loader is not None
    builds = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builds)
    return builds.compiled_modules()  # type: ignore[no-any-return]


def main() -> int:
    pure = {}
    for name in listed_modules():
        module = importlib.import_module(name)
        if not str(module.__file__).endswith(".so"):
            pure[name] = module.__file__
    if pure:
        print(f"not compiled: {pure}", file=sys.stderr)
        return 1
    value = {"path": "/cart/7", "n": 2**70, "f": float("nan"), "b": b"\x00", "l": [1.5, None]}
    back = anyvalue.decode(anyvalue.encode(value))
    assert repr(back) == repr(value), (back, value)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("check").start_as_current_span("compiled", attributes={"a": 1}):
        pass
    (span,) = exporter.get_finished_spans()
    payload, _fitted = encode_span(span, 1, 4064)
    assert b"compiled" in payload, payload
    print(f"{len(listed_modules())} modules compiled; a value and a span encoded by them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
