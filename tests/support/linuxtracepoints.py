# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Microsoft's LinuxTracepoints (MIT), built once per CI run by .ci/run, for kernel tests
against writers and a decoder nobody here wrote: its ``perf-decode``, and the C++ test
writers of tests/support/peers/ compiled against its libraries with g++.

The build is ``$LINUXTRACEPOINTS_BUILD``, else ``build/linuxtracepoints`` in the checkout
(where .ci/run puts it). The writers are compiled once into a cache under the build (not
the tree), named by a hash of their sources, so a changed writer is compiled again. The
qemu guest sees the host's files read-only: the host compiles them once the tests are
collected (tests/kernel/conftest.py), before a guest runs them. Without a build a test that
needs one fails, naming what to run: a CI run must not pass without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
BUILD_ENV = "LINUXTRACEPOINTS_BUILD"
DEFAULT_BUILD = ROOT / "build" / "linuxtracepoints"
WRITERS = Path(__file__).resolve().parent / "peers"
CACHE = "otel-userevents-test-writers"
LIBRARIES = ("libeventheader-tracepoint.a", "libtracepoint.a")
FLAGS = ("-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror")
COMPILE_SECONDS = 300
"""A bound on one writer's compilation (a few seconds each on a 2-CPU host)."""
HOW_TO_BUILD = (
    "cmake -S ../shared/peers/LinuxTracepoints -B build/linuxtracepoints "
    "-DCMAKE_BUILD_TYPE=Release && make -C build/linuxtracepoints -j2 (as .ci/run does; "
    f"or set {BUILD_ENV} to such a build)"
)


def build() -> Path:
    return Path(os.environ.get(BUILD_ENV) or DEFAULT_BUILD)


def missing() -> str | None:
    """Why there is no usable build, or None."""
    where = build()
    needed = [where / "CMakeCache.txt", where / "bin" / "perf-decode"]
    needed += [where / "lib" / name for name in LIBRARIES]
    absent = [str(path) for path in needed if not path.is_file()]
    if absent:
        return f"LinuxTracepoints is not built ({', '.join(absent)} missing): run {HOW_TO_BUILD}"
    return None


def require() -> Path:
    """The build, or the test fails naming what to run."""
    reason = missing()
    if reason is not None:
        pytest.fail(reason, pytrace=False)
    return build()


def source() -> Path:
    """The checkout the build was made from (its CMakeCache says)."""
    for line in (require() / "CMakeCache.txt").read_text().splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:INTERNAL="):
            return Path(line.split("=", 1)[1])
    pytest.fail(f"{build()}/CMakeCache.txt names no source directory", pytrace=False)


def perf_decode() -> Path:
    return require() / "bin" / "perf-decode"


def _command(name: str, output: Path) -> list[str]:
    top = source()
    includes = [top / "libeventheader-tracepoint" / "include", top / "libtracepoint" / "include"]
    return [
        shutil.which("g++") or "g++", *FLAGS, *(f"-I{path}" for path in includes),
        "-o", str(output), str(WRITERS / f"{name}.cpp"),
        f"-L{build() / 'lib'}", "-leventheader-tracepoint", "-ltracepoint",
    ]  # fmt: skip


def _cached(name: str) -> Path:
    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(WRITERS.glob("*.[ch]*")):  # the writer, and the header they share
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(" ".join(FLAGS).encode())
    return build() / CACHE / f"{name}-{digest.hexdigest()}"


def names() -> list[str]:
    return sorted(path.stem for path in WRITERS.glob("*.cpp"))


def compile_writers() -> None:
    """Compile every writer not yet in the cache (on the host, before a guest runs)."""
    if missing() is not None:
        return  # each test that needs the build fails, naming it
    for name in names():
        output = _cached(name)
        if output.exists():
            continue
        output.parent.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(dir=output.parent) as scratch:
            built = Path(scratch) / name
            done = subprocess.run(
                _command(name, built), capture_output=True, text=True, timeout=COMPILE_SECONDS
            )
            if done.returncode != 0:
                error = f"g++ {name}.cpp failed:\n{done.stderr}"
                output.with_suffix(".error").write_text(error)
                raise RuntimeError(error)
            built.rename(output)


def writer(name: str) -> Path:
    """A compiled writer of tests/support/peers/ (compiled here when this can write the
    cache, as natively; a guest finds what the host compiled)."""
    require()
    output = _cached(name)
    if not output.exists():
        if output.with_suffix(".error").exists():
            pytest.fail(output.with_suffix(".error").read_text(), pytrace=False)
        try:
            compile_writers()
        except OSError as error:
            pytest.fail(
                f"{output} is not compiled and cannot be here ({error}); the host compiles "
                "the writers when it collects the kernel tests: run pytest from the host",
                pytrace=False,
            )
    return output
