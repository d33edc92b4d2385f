# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's native core as users get it (docs/building.md): the wheel that
``python -m build`` makes from the sdist carries ``_core`` and, installed in a clean
environment, loads it; the sdist carries its sources and no compiled module; and where the
core is missing or broken, ``load_core()`` falls back to the Python path and says why, or,
with ``OTEL_EXPORTER_USER_EVENTS_READER_CORE=native``, refuses with a clear ImportError."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.reader.native.native_core import READER_CORE

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "opentelemetry_exporter_userevents"
NATIVE = f"{PACKAGE}/reader/native"
CORE_SOURCES = ("core.c", "core.h", "build_core.py")

SHOW_CORE = textwrap.dedent(
    """
    from opentelemetry_exporter_userevents.reader.native import native_core
    try:
        choice = native_core.load_core()
    except ImportError as exc:
        print("ImportError:", exc)
    else:
        print(choice.core is not None, choice.reason, sep="|")
    """
)


def _env(**settings: str) -> dict[str, str]:
    """This environment without what would point Python at the checkout or choose a core."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", READER_CORE, "LD_PRELOAD", "ASAN_OPTIONS")
    }
    env.update(settings)
    return env


def _show_core(python: Path | str, cwd: Path, **settings: str) -> str:
    done = subprocess.run(
        [str(python), "-c", SHOW_CORE], cwd=cwd, env=_env(**settings),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_the_built_wheel_carries_the_core_and_loads_it_in_a_clean_environment(tmp_path):
    """CI's build (the sdist, and the wheel built from it), installed where no checkout is."""
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
        env=_env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (sdist,) = dist.glob(f"{PACKAGE}-*.tar.gz")
    (wheel,) = dist.glob(f"{PACKAGE}-*.whl")

    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    for source in CORE_SOURCES:
        assert any(n.endswith(f"/{NATIVE}/{source}") for n in names), source
    assert any(n.endswith("/hatch_build.py") for n in names), "the sdist's wheel needs its hook"
    assert not [n for n in names if n.endswith(".so")], "a compiled module in the sdist"

    # tagged for this interpreter and platform, not py3-none-any
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert wheel.name.split("-")[2:4] == [tag, tag], wheel.name
    with zipfile.ZipFile(wheel) as archive:
        cores = [n for n in archive.namelist() if n.startswith(f"{NATIVE}/_core")]
        metadata = archive.read(f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}"
                                ".dist-info/WHEEL").decode()  # fmt: skip
    assert len(cores) == 1 and cores[0].endswith(".so"), cores
    assert "Root-Is-Purelib: false" in metadata

    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheel)],
        env=_env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    where = subprocess.run(
        [str(python), "-c", f"import {PACKAGE} as m; print(m.__file__)"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert where.startswith(str(environment)), where
    assert _show_core(python, tmp_path) == "True|native"
    assert _show_core(python, tmp_path, **{READER_CORE: "native"}) == "True|native"


def test_without_a_compiler_the_build_warns_and_makes_the_pure_wheel(tmp_path):
    """hatch_build.py: a C compiler that is not there (CC names none) fails no build."""
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
        env=_env(CC=str(tmp_path / "no-such-cc")), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    output = built.stdout + built.stderr
    assert built.returncode == 0, output[-3000:]
    assert "the native core did not build" in output and "the pure one" in output, output
    (wheel,) = tmp_path.glob(f"{PACKAGE}-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        assert not [n for n in archive.namelist() if n.endswith(".so")]


@pytest.fixture
def copy_without_core(tmp_path):
    """The package copied to a folder of its own, without any compiled module."""
    shutil.copytree(
        ROOT / PACKAGE,
        tmp_path / PACKAGE,
        ignore=shutil.ignore_patterns("*.so", "__pycache__"),
    )
    return tmp_path


def test_without_the_core_the_reader_falls_back_and_says_why(copy_without_core):
    assert not list((copy_without_core / NATIVE).glob("_core*"))
    env = {"PYTHONPATH": str(copy_without_core)}
    shown = _show_core(sys.executable, copy_without_core, **env)
    assert shown.startswith("False|python (the native core did not load: "), shown
    assert f"{PACKAGE}.reader.native._core" in shown, shown
    shown = _show_core(sys.executable, copy_without_core, **env, **{READER_CORE: "auto"})
    assert shown.startswith("False|python (the native core did not load: "), shown
    shown = _show_core(sys.executable, copy_without_core, **env, **{READER_CORE: "python"})
    assert shown == f"False|python ({READER_CORE}=python)"


def test_without_the_core_native_is_a_clear_import_error(copy_without_core):
    env = {"PYTHONPATH": str(copy_without_core), READER_CORE: "native"}
    shown = _show_core(sys.executable, copy_without_core, **env)
    assert shown.startswith(
        f"ImportError: {READER_CORE}=native, but the native core did not load: "
    ), shown


def test_a_core_that_cannot_load_is_a_fallback_too(copy_without_core):
    """A broken module (here: not an ELF file) in the core's place."""
    broken = copy_without_core / NATIVE / f"_core{EXTENSION_SUFFIXES[0]}"
    broken.write_bytes(b"not a shared object\n")
    env = {"PYTHONPATH": str(copy_without_core)}
    shown = _show_core(sys.executable, copy_without_core, **env)
    assert shown.startswith("False|python (the native core did not load: "), shown
    shown = _show_core(sys.executable, copy_without_core, **env, **{READER_CORE: "native"})
    assert shown.startswith(f"ImportError: {READER_CORE}=native, but the native core"), shown
