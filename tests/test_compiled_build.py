# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The compiled build (docs/building.md): the modules mypyc compiles are the package's,
it is built only when asked for, and this session imports the build it says it tests.
CI runs the host tests in both builds, and each image's kernel tests half in each."""

from __future__ import annotations

import re

from tests.support.builds import (
    PACKAGE,
    ROOT,
    compiled_modules,
    expected_build,
    imported_files,
    mypyc_hook,
    wrong_build,
)


def test_the_compiled_modules_are_files_of_the_package_listed_once():
    include = mypyc_hook()["include"]
    assert isinstance(include, list) and include
    assert len(set(include)) == len(include)
    for path in include:
        assert path.startswith(f"/{PACKAGE}/") and path.endswith(".py"), path
        assert (ROOT / path.lstrip("/")).is_file(), f"{path} is not in the tree"
        assert not path.endswith("__init__.py"), "a package's __init__ stays pure"


def test_the_wheel_is_pure_unless_the_compiled_build_is_asked_for():
    hook = mypyc_hook()
    assert hook["enable-by-default"] is False
    # the hook's own requirements, installed only in a build that enables it
    assert any(str(d).startswith("hatch-mypyc") for d in hook["dependencies"])  # type: ignore[attr-defined]


def test_this_session_imports_the_build_it_says_it_tests():
    files = imported_files()
    assert len(files) == len(compiled_modules())
    assert wrong_build(files) == {}, (
        f"a {expected_build()} session imported these from the other build (stale "
        "extension modules beside the sources? delete the *.so files)"
    )


def test_a_releases_wheels_are_built_with_the_hook_on_for_both_architectures():
    """docs/building.md: cibuildwheel turns the hook on, builds x86_64 and aarch64, and
    checks each wheel with a script that exists."""
    text = (ROOT / "pyproject.toml").read_text()
    table = text.split("[tool.cibuildwheel]\n", 1)[1].split("\n[tool.pytest", 1)[0]
    assert 'environment = { HATCH_BUILD_HOOK_ENABLE_MYPYC = "true" }' in table
    assert 'archs = ["x86_64", "aarch64"]' in table
    script = re.search(r'test-command = "python \{project\}/(\S+)"', table)
    assert script and (ROOT / script[1]).is_file()
