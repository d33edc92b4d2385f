# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""In the guest, the build a kernel test session says it tests is the one it imports: with
the compiled tree given (testbed/builds.py), half of each image's kernel test files run in
the compiled build, so this file runs in the compiled build on one image and in the pure
one on the other."""

from __future__ import annotations

import pytest

from tests.support.builds import expected_build, imported_files, wrong_build

pytestmark = pytest.mark.kernel


def test_the_guest_imports_the_build_it_says_it_tests():
    files = imported_files()
    assert wrong_build(files) == {}, f"a {expected_build()} session imported the other build"
