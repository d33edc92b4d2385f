# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Which build a test session imports: the modules the compiled build compiles (the mypyc
hook's list in pyproject.toml) and where each was imported from."""

from __future__ import annotations

import ast
import importlib
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "opentelemetry_exporter_userevents"


def mypyc_hook() -> dict[str, object]:
    """pyproject.toml's ``[tool.hatch.build.targets.wheel.hooks.mypyc]`` table, its
    one-line keys and its lists (read without tomllib, which Python 3.10 lacks)."""
    text = (ROOT / "pyproject.toml").read_text()
    table = text.split("[tool.hatch.build.targets.wheel.hooks.mypyc]\n", 1)[1]
    table = table.split("\n[", 1)[0]
    hook: dict[str, object] = {}
    for key, value in re.findall(r"^([a-z-]+) = (\[.*?\]|[^\n]+)$", table, re.M | re.S):
        value = re.sub(r"#[^\n]*", "", value)
        booleans = {"true": True, "false": False}
        hook[key] = booleans[value] if value in booleans else ast.literal_eval(value)
    return hook


def compiled_modules() -> list[str]:
    """The dotted names of the modules the compiled build compiles."""
    include = mypyc_hook()["include"]
    assert isinstance(include, list)
    return [path.strip("/").removesuffix(".py").replace("/", ".") for path in include]


def imported_files() -> dict[str, str]:
    """Each compiled module's name and the file this session imported it from."""
    return {name: str(importlib.import_module(name).__file__) for name in compiled_modules()}


def expected_build() -> str:
    """``compiled`` in a session of the compiled build (testbed/builds.py sets it), else
    ``pure``."""
    return "compiled" if os.environ.get("USER_EVENTS_BUILD") == "compiled" else "pure"


def wrong_build(files: dict[str, str]) -> dict[str, str]:
    """The modules of ``files`` not imported as :func:`expected_build` says: sources in
    the compiled build, extension modules in the pure one."""
    compiled = expected_build() == "compiled"
    return {name: f for name, f in files.items() if f.endswith(".so") != compiled}
