# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The test bed itself: a kernel test that fails in the guest fails the host run."""

import os
from pathlib import Path

import pytest

from testbed import guest
from testbed.pytest_plugin import native_unavailable_reason

ROOT = Path(__file__).resolve().parent.parent


def test_guest_output_is_the_text_between_the_markers(tmp_path):
    run = guest.GuestRun(0, f"bios junk\n{guest.BEGIN}\nhello\nworld\n{guest.END}\npanic", tmp_path)

    assert run.output == "hello\nworld\n"


def test_unavailable_reason_names_what_is_missing(tmp_path):
    assert "USER_EVENTS_KERNEL" in guest.unavailable_reason(None)
    assert "is not a file" in guest.unavailable_reason(str(tmp_path / "missing"))


GUEST_TESTS = """
import os
import pytest

@pytest.mark.kernel
def test_passes_on_user_events():
    assert os.path.exists("/sys/kernel/tracing/user_events_data")

@pytest.mark.kernel
def test_fails_in_guest():
    print("output from the guest")
    assert 1 + 1 == 3

@pytest.mark.kernel
def test_skips_in_guest():
    pytest.skip("a reason from the guest")

def test_runs_on_the_host():
    assert "USER_EVENTS_TESTBED_GUEST" not in os.environ
"""


@pytest.mark.skipif(
    guest.unavailable_reason(os.path.abspath(os.environ.get(guest.KERNEL_ENV, ""))) is not None
    or native_unavailable_reason() is None
    or os.environ.get("USER_EVENTS_TESTBED_GUEST") == "1",
    reason="needs a host without user_events and a kernel image for the guest",
)
@pytest.mark.parametrize("require", [False, True])
def test_guest_outcomes_become_host_outcomes(pytester, pytestconfig, require):
    pytester.makepyfile(test_guest=GUEST_TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    kernel: needs user_events\n")
    env_path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    pytester._monkeypatch.setenv("PYTHONPATH", env_path)
    pytester._monkeypatch.delenv("USER_EVENTS_REQUIRE_KERNEL", raising=False)
    image = pytestconfig.getoption("kernel_image")  # made absolute by the plugin
    args = ["-p", "testbed.pytest_plugin", "-rs", f"--kernel-image={image}"]
    args += ["--require-kernel"] if require else []

    result = pytester.runpytest_subprocess(*args, timeout=600)

    if require:  # a kernel test skipped in the guest fails the run
        result.assert_outcomes(passed=2, failed=2)
        result.stdout.fnmatch_lines(["*skipped in the guest: *a reason from the guest*"])
    else:
        result.assert_outcomes(passed=2, failed=1, skipped=1)
        result.stdout.fnmatch_lines(["*in the guest: *a reason from the guest*"])
    result.stdout.fnmatch_lines([
        "*[ran in the user_events qemu guest]*",
        "*assert (1 + 1) == 3*",
        "*output from the guest*",
        f"user_events kernel tests: {3 if require else 2} ran in the qemu guest*",
    ])  # fmt: skip


UNRUNNABLE = """
import pytest

@pytest.mark.kernel
def test_needs_the_kernel():
    pass

def test_host():
    pass
"""


@pytest.mark.skipif(
    native_unavailable_reason() is None, reason="this host has user_events: nothing to refuse"
)
@pytest.mark.parametrize("require", [False, True])
def test_without_any_kernel_require_fails_and_otherwise_skips(pytester, require):
    pytester.makepyfile(test_unrunnable=UNRUNNABLE)
    pytester.makeini("[pytest]\nmarkers =\n    kernel: needs user_events\n")
    pytester._monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester._monkeypatch.delenv(guest.KERNEL_ENV, raising=False)
    pytester._monkeypatch.delenv("USER_EVENTS_REQUIRE_KERNEL", raising=False)
    args = ["-p", "testbed.pytest_plugin", "-rs"] + (["--require-kernel"] if require else [])

    result = pytester.runpytest_subprocess(*args, timeout=120)

    if require:
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines(["*--require-kernel is set and no kernel test ran*"])
        assert result.ret == pytest.ExitCode.TESTS_FAILED
    else:
        result.assert_outcomes(passed=1, skipped=1)
        result.stdout.fnmatch_lines(["*no user_events kernel*USER_EVENTS_KERNEL*"])
        assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["user_events kernel tests: 0 ran nowhere*"])
