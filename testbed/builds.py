# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The compiled build beside the pure one, in one boot per image.

With ``USER_EVENTS_COMPILED_TREE`` naming a copy of the checkout whose hot-path modules are
the compiled wheel's extension modules (``.ci/run`` makes it; docs/building.md), each
image's guest runs half of the kernel test files from that copy and the other half from
this checkout, the halves swapped between the first and the second image. So every kernel
test runs once on each image, and across the two images once in each build, while CI still
boots each image once. The compiled session runs with ``USER_EVENTS_BUILD=compiled``, which
``tests/kernel/test_build.py`` checks against the modules it imports.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

COMPILED_TREE_ENV = "USER_EVENTS_COMPILED_TREE"
"""A checkout with the compiled build's extension modules beside the sources."""
BUILD_ENV = "USER_EVENTS_BUILD"
"""``compiled`` in a session of the compiled tree; unset (the pure build) otherwise."""


def split(nodeids: Sequence[str], image_index: int) -> tuple[list[str], list[str]]:
    """``nodeids`` as (pure, compiled): whole test files, alternately in sorted order,
    the first file compiled on odd ``image_index`` and pure on even ones."""
    files = sorted({nodeid.split("::", 1)[0] for nodeid in nodeids})
    compiled_files = {name for i, name in enumerate(files) if (i + image_index) % 2}
    pure = [n for n in nodeids if n.split("::", 1)[0] not in compiled_files]
    compiled = [n for n in nodeids if n.split("::", 1)[0] in compiled_files]
    return pure, compiled


def guest_command(
    pytest_argv: Sequence[str],
    pure: tuple[str, Sequence[str]],
    compiled: tuple[str, Sequence[str]],
) -> list[str]:
    """One shell command that runs ``pytest_argv`` (options only) on each (rootdir,
    nodeids) that has nodeids, the compiled one from its tree with ``BUILD_ENV`` set, and
    exits as pytest would for both: another code than 0 or 1 first, then 1 if either
    session had a failure, else 0."""
    lines = ["status=0"]
    for build, (rootdir, nodeids) in (("pure", pure), ("compiled", compiled)):
        if not nodeids:
            continue
        argv = [*pytest_argv, "--rootdir", rootdir, "-c", f"{rootdir}/pyproject.toml"]
        env = (
            f"{BUILD_ENV}=compiled PYTHONPATH={shlex.quote(rootdir)} "
            if build == "compiled"
            else ""
        )
        lines += [
            f"cd {shlex.quote(rootdir)}",
            f"{env}{shlex.join([*argv, *nodeids])}",
            'code=$?; case $code in 0) ;; 1) [ "$status" = 0 ] && status=1 ;; '
            '*) [ "$status" -le 1 ] && status=$code ;; esac',
        ]
    lines.append('exit "$status"')
    return ["sh", "-c", "\n".join(lines)]
