# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The layers stay apart: the kernel contract (abi/) knows no OpenTelemetry, the wire contract
(record/) knows only the kernel contract, and the write side (_export/ and the public exporter
modules) and the read side (reader/) never import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "opentelemetry_exporter_userevents"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE
WRITE_SIDE = {
    "_export",
    "span_exporter",
    "log_exporter",
    "metric_exporter",
    "processors",
    "sampler",
    "configurator",
    "logging_handler",
    "lean_tracer",
}
SHARED = {"abi", "record", "environment_variables", "version", "_forksafe"}


def _modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def _layer(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    return relative.parts[0] if len(relative.parts) > 1 else relative.name


def _imports(path: Path) -> set[str]:
    """The top-level layers of our package, and the external top-level packages, that the
    module imports (at any depth in the file, type-checking imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == PACKAGE:
                names = [f"{PACKAGE}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            found.add(parts[1] if parts[0] == PACKAGE and len(parts) > 1 else parts[0])
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_module_imports_only_the_layers_below_it(path: Path) -> None:
    layer = _layer(path)
    imported = _imports(path) - {layer}
    if layer == "abi":
        assert "opentelemetry" not in imported, "the kernel contract knows no OpenTelemetry"
        assert not imported & (WRITE_SIDE | {"reader", "record"})
    elif layer == "record":
        assert not imported & (WRITE_SIDE | {"reader"}), imported
    elif layer == "reader":
        assert not imported & WRITE_SIDE, f"the read side imports the write side: {imported}"
    elif layer in WRITE_SIDE:
        assert "reader" not in imported, "the write side imports the read side"


def test_no_module_is_a_god_module() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _modules()}
    assert {name: n for name, n in sizes.items() if n > 500} == {}


def test_every_module_belongs_to_a_known_layer() -> None:
    layers = {_layer(p) for p in _modules()} - {"__init__"}
    assert layers <= WRITE_SIDE | SHARED | {"reader"}, layers - (WRITE_SIDE | SHARED | {"reader"})


READER = ROOT / "reader"
READER_STAGES: dict[str, set[str]] = {
    # a stage (a folder of reader/, or one of its flat modules) and what it may import
    "decode": set(),
    "native": set(),
    "live": {"decode"},
    "capture": {"decode"},
    "views": {"decode", "live"},
    "join": {"decode", "views"},
    "outputs": {"decode", "join", "views"},
    "hist": {"decode", "live"},
    "pipeline": {"decode", "native", "live", "capture", "views", "join", "outputs"},
    "commands": {
        "decode",
        "native",
        "live",
        "capture",
        "views",
        "join",
        "outputs",
        "hist",
        "pipeline",
    },
    "stop_early": set(),
    "options": {"views", "commands"},
    "delivery_flags": {"options"},
    "cli": {"commands", "native", "pipeline", "stop_early", "options", "delivery_flags"},
    "entry_point": {"stop_early", "cli"},
    "__init__": {"decode", "live", "join"},
}
READER_COMMON = {"terminal_text", "private_file"}
"""Escaping text for a terminal and writing private files: any stage may use them."""


def _stage(path: Path) -> str:
    relative = path.relative_to(READER).with_suffix("")
    return relative.parts[0] if len(relative.parts) > 1 else relative.name


def _reader_imports(path: Path) -> set[str]:
    """The reader's stages (folders or flat modules) that the module imports."""
    prefix = f"{PACKAGE}.reader"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if node.module == prefix:
            found |= {alias.name for alias in node.names}
        elif node.module.startswith(prefix + "."):
            found.add(node.module[len(prefix) + 1 :].split(".")[0])
    return found


@pytest.mark.parametrize(
    "path", sorted(READER.rglob("*.py")), ids=lambda p: str(p.relative_to(READER))
)
def test_each_reader_stage_imports_only_the_stages_before_it(path: Path) -> None:
    """The reader's folders are its stages: decode ← live, capture ← views ← join ←
    outputs ← pipeline (the object that wires them, docs/reader-pipeline.md) ← commands
    ← cli. No stage reaches forward (live never imports an
    output, decode never imports live), so each can be read, tested and replaced alone."""
    stage = _stage(path)
    if stage in READER_COMMON:
        assert not _reader_imports(path) - {stage}, "the common helpers import no stage"
        return
    assert stage in READER_STAGES, f"{stage}: a reader module outside the known stages"
    forward = _reader_imports(path) - READER_STAGES[stage] - READER_COMMON - {stage}
    assert not forward, f"{stage} imports {sorted(forward)}"
