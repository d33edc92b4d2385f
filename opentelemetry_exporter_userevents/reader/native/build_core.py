# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Builds the native core (``core.c``) into the extension module ``_core`` with cffi, in
API mode (the compiler checks every call against ``core.h``).

The wheel's build hook (``hatch_build.py``) calls :func:`build`; a checkout builds it in
place with ``python -m opentelemetry_exporter_userevents.reader.native.build_core``
(``--sanitize`` for AddressSanitizer and UndefinedBehaviorSanitizer: run it with
``LD_PRELOAD=$(cc -print-file-name=libasan.so)``). Nothing here is imported at run time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
MODULE = "opentelemetry_exporter_userevents.reader.native._core"
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"]
SANITIZE = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all"]  # fmt: skip
RELEASE, RELEASE_LINK = ["-g0"], ["-s"]
"""Without the sanitizers: no debug information (Python's own flags ask for it) and no
symbol table, so no path of the machine that built it is in the module, and the same
sources build the same bytes wherever they sit (CI compares the container recipe's wheel
with its own)."""


def ffibuilder(sanitize: bool = False) -> FFI:
    """The cffi builder of ``_core``."""
    ffi = FFI()
    ffi.cdef((HERE / "core.h").read_text())
    flags = CFLAGS + (SANITIZE if sanitize else RELEASE)
    ffi.set_source(
        MODULE,
        '#include <stdint.h>\n#include "core.h"\n',
        sources=[str(HERE / "core.c")],
        include_dirs=[str(HERE)],
        extra_compile_args=flags,
        extra_link_args=SANITIZE if sanitize else RELEASE_LINK,
    )
    return ffi


def build(into: Path, sanitize: bool = False) -> Path:
    """Compile ``_core`` and put it in ``into`` (the package's ``reader/native``
    folder, in a checkout or a wheel's tree); its path. The generated C and the objects
    stay in a temporary folder. A core already there is replaced, not overwritten: a
    process that has it loaded keeps its own file (rewriting a mapped module in place
    can crash it)."""
    with tempfile.TemporaryDirectory(prefix="otel-userevents-core-") as work:
        built = Path(ffibuilder(sanitize).compile(tmpdir=work, verbose=False))
        into.mkdir(parents=True, exist_ok=True)
        target = into / built.name
        partial = into / f".{built.name}.partial"
        shutil.copyfile(built, partial)
        os.replace(partial, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sanitize", action="store_true", help="ASan and UBSan build")
    args = parser.parse_args(argv)
    for stale in HERE.glob("_core.*.so"):
        stale.unlink()
    print(build(HERE, args.sanitize))
    return 0


if __name__ == "__main__":
    sys.exit(main())
