# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The wheel's build hook: the reader's native core (docs/building.md).

It compiles ``_core`` from ``reader/native/core.c`` with
``reader/native/build_core.py`` (cffi, API mode):

- a wheel (``python -m build``, ``pip install .``): into a temporary folder, from which
  the module goes into the wheel beside ``native_core.py``; the wheel is then tagged for
  this interpreter and platform (``cp312-cp312-linux_x86_64`` and the like) instead of
  ``py3-none-any``;
- an editable install (``pip install -e .``, README.rst's and CI's): in place, into the
  checkout's ``reader/native/`` (``*.so`` is ignored by git), where the checkout imports it.

Where it cannot (no C compiler, no Python headers, a read-only checkout), the build does
not fail: it warns and the wheel is the pure one, on which the reader decodes in Python
and ``load_core()`` says why. ``OTEL_EXPORTER_USER_EVENTS_BUILD_CORE`` changes that:
``required`` fails the build instead (a release's wheels, CI), ``skip`` builds the pure
wheel without trying; ``auto`` (the default) is the above.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BUILD_CORE = "OTEL_EXPORTER_USER_EVENTS_BUILD_CORE"
NATIVE = "opentelemetry_exporter_userevents/reader/native"


class NativeCoreHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._work: str | None = None
        if self.target_name != "wheel":
            return
        wanted = os.environ.get(BUILD_CORE, "auto").strip().lower() or "auto"
        if wanted not in ("auto", "required", "skip"):
            raise ValueError(f"{BUILD_CORE}={wanted!r}: auto, required or skip")
        if wanted == "skip":
            self.app.display_info(f"the native core is not built ({BUILD_CORE}=skip)")
            return
        source = Path(self.root) / NATIVE
        try:
            if version == "editable":
                built = self._build(source, into=source)
            else:
                self._work = tempfile.mkdtemp(prefix="otel-userevents-wheel-core-")
                built = self._build(source, into=Path(self._work))
        except Exception as exc:  # a compiler's failure may be any of several
            if wanted == "required":
                message = f"the native core did not build ({BUILD_CORE}=required)"
                raise RuntimeError(message) from exc
            stale = source / f"_core{EXTENSION_SUFFIXES[0]}"
            if version == "editable" and stale.is_file():
                stale.unlink()  # an earlier build's, of other sources maybe: not imported
            self.app.display_warning(
                f"the native core did not build ({type(exc).__name__}: {exc}); this "
                "build is the pure one, whose reader decodes in Python (docs/building.md)"
            )
            return
        self.app.display_info(f"the native core: {built.name}")
        if version != "editable":
            build_data["force_include"][str(built)] = f"{NATIVE}/{built.name}"
            build_data["pure_python"] = False
            build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)

    @staticmethod
    def _build(source: Path, into: Path) -> Path:
        """``build_core.build`` from the tree being built (the package is not importable
        in the build's environment); it replaces a core of the same name already in
        ``into`` (a sanitized one, say)."""
        spec = importlib.util.spec_from_file_location(
            "_otel_userevents_build_core", source / "build_core.py"
        )
        assert spec is not None and spec.loader is not None
        build_core = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(build_core)
        built: Path = build_core.build(into)
        return built
