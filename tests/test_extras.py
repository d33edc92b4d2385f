# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The extras match the recipes: every ``--exporter`` the README, docs/ and ``deploy/`` use is
installed by ``[reader]``, or by the extra the recipe names beside it (``grpc``); a user who
followed the install line is not told ``no exporter named 'otlp_proto_http'``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.reader.options import EXPORTER_PACKAGES
from tests.support.readme_commands import documentation

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
RECIPES = [
    ROOT / "README.rst",
    *sorted((ROOT / "docs").glob("*.rst")),
    *sorted(p for p in (ROOT / "deploy").rglob("*") if p.is_file()),
]
EXTRA_OF = {"otlp_proto_grpc": "grpc"}
"""Exporters an extra of their own installs; the recipe names that extra beside them."""


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {
        extra: [re.split(r"[ <>=;\[]", requirement, maxsplit=1)[0] for requirement in listed]
        for extra, listed in project["optional-dependencies"].items()
    }


def _exporters_used() -> set[str]:
    used = set()
    for path in RECIPES:
        text = path.read_text(encoding="utf-8", errors="replace")
        used |= set(re.findall(r"--exporter[ =]([a-z_]+)", text))
    return used


def test_the_recipes_use_the_otlp_exporters():
    assert {"otlp_proto_http", "otlp_proto_grpc"} <= _exporters_used()


@pytest.mark.parametrize("exporter", sorted(_exporters_used()))
def test_each_exporter_a_recipe_uses_comes_with_the_extra_it_is_used_with(exporter):
    package = EXPORTER_PACKAGES[exporter].split()[0]
    extra = EXTRA_OF.get(exporter, "reader")
    assert package in _extras()[extra], (exporter, extra)
    if extra != "reader":
        readme = documentation()
        assert re.search(rf"``--exporter {exporter}`` \(install the ``{extra}`` extra", readme)
