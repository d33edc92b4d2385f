# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The value encoding's error, in a module of its own: the compiled build (mypyc) cannot
compile a class that inherits from a builtin exception, and compiles :mod:`.anyvalue`."""

from __future__ import annotations

__all__ = ["UnsupportedValue"]


class UnsupportedValue(TypeError):
    """A value :func:`.anyvalue.encode` cannot write: not an AnyValue, a non-str key, or too
    deep."""
