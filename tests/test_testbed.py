# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The test bed itself: a kernel test that fails in the guest fails the host run."""

import os
import re
import sys
from pathlib import Path

import pytest

from testbed import guest
from testbed.pytest_plugin import native_unavailable_reason

ROOT = Path(__file__).resolve().parent.parent
KERNEL_IMAGES = [
    os.path.abspath(image)
    for image in os.environ.get(guest.KERNEL_ENV, "").split(os.pathsep)
    if image
]
"""The images of this run (``USER_EVENTS_KERNEL``), for the nested runs."""


def test_guest_output_is_the_text_between_the_markers(tmp_path):
    run = guest.GuestRun(0, f"bios junk\n{guest.BEGIN}\nhello\nworld\n{guest.END}\npanic", tmp_path)

    assert run.output == "hello\nworld\n"


def test_unavailable_reason_names_what_is_missing(tmp_path):
    assert "USER_EVENTS_KERNEL" in guest.unavailable_reason(None)
    assert "is not a file" in guest.unavailable_reason(str(tmp_path / "missing"))


GUEST_TESTS = """
import os
import pytest
from testbed.pytest_plugin import kernel_has_multi_format

@pytest.mark.kernel
def test_passes_on_user_events():
    assert os.path.exists("/sys/kernel/tracing/user_events_data")

@pytest.mark.kernel
def test_fails_in_guest():
    print("output from the guest")
    assert 1 + 1 == 3, f"multi_format={kernel_has_multi_format()}"

@pytest.mark.kernel
def test_skips_in_guest():
    pytest.skip("a reason from the guest")

@pytest.mark.kernel
@pytest.mark.multi_format
def test_needs_multi_format():
    pass

def test_runs_on_the_host():
    assert "USER_EVENTS_TESTBED_GUEST" not in os.environ
"""

GUEST_BED_UNAVAILABLE = (
    not KERNEL_IMAGES
    or any(guest.unavailable_reason(image) is not None for image in KERNEL_IMAGES)
    or native_unavailable_reason() is None
    or os.environ.get("USER_EVENTS_TESTBED_GUEST") == "1"
)


def _nested_run(pytester, images, *args):
    pytester.makeini("[pytest]\nmarkers =\n    kernel: needs user_events\n")
    env_path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    pytester._monkeypatch.setenv("PYTHONPATH", env_path)
    pytester._monkeypatch.delenv("USER_EVENTS_REQUIRE_KERNEL", raising=False)
    pytester._monkeypatch.delenv(guest.KERNEL_ENV, raising=False)
    image_args = [f"--kernel-image={image}" for image in images]
    return pytester.runpytest_subprocess(
        "-p", "testbed.pytest_plugin", "-rs", "-v", *image_args, *args, timeout=1200
    )


def _two_images(tmp_path):
    """The configured images; one alone is given twice (under another name) so that the
    run still boots two guests."""
    if len(KERNEL_IMAGES) > 1:
        return list(KERNEL_IMAGES)
    again = tmp_path / f"{os.path.basename(KERNEL_IMAGES[0])}-again"
    again.symlink_to(KERNEL_IMAGES[0])
    return [KERNEL_IMAGES[0], str(again)]


@pytest.mark.skipif(
    GUEST_BED_UNAVAILABLE, reason="needs a host without user_events and kernel images"
)
@pytest.mark.parametrize("require", [False, True])
def test_guest_outcomes_become_host_outcomes_per_image(pytester, tmp_path, require):
    pytester.makepyfile(test_guest=GUEST_TESTS)
    images = _two_images(tmp_path)

    result = _nested_run(pytester, images, *(["--require-kernel"] if require else []))

    text = result.stdout.str()
    capable = {}  # what each guest's kernel said about MULTI_FORMAT, in the failure report
    for image in images:
        label = os.path.basename(image)
        found = re.search(
            rf"_ test_fails_in_guest@{re.escape(label)} \[user_events guest\] _.*?"
            rf"\[ran in the user_events qemu guest on {re.escape(image)}\]"
            r".*?multi_format=(True|False).*?output from the guest",
            text,
            re.S,
        )
        assert found, f"no failure report naming {image}"
        capable[label] = found.group(1) == "True"
        has = capable[label]
        result.stdout.fnmatch_lines([
            f"*test_passes_on_user_events@{label} PASSED*",
            f"*test_needs_multi_format@{label} {'PASSED' if has else 'SKIPPED'}*",
            f"user_events kernel tests: {2 + has} ran in the qemu guest on {label}, "
            f"{2 - has} skipped",
        ])  # fmt: skip
        if not has:  # the one skip --require-kernel accepts
            result.stdout.fnmatch_lines([
                f"*in the guest ({label}): *needs USER_EVENT_REG_MULTI_FORMAT (Linux 6.9+)*"
            ])  # fmt: skip
        if require:
            result.stdout.fnmatch_lines([f"*test_skips_in_guest@{label} FAILED*"])
        else:
            result.stdout.fnmatch_lines([f"*in the guest ({label}): *a reason from the guest*"])
    n, c = len(images), sum(capable.values())
    at_once = (
        f"user_events: {4 * n} kernel tests in qemu guests, on {', '.join(images)} ({n} at once)*"
    )
    result.stdout.fnmatch_lines([at_once])  # every guest boots at once, beside the host's tests
    host_test = text.index("::test_runs_on_the_host PASSED")
    first_stand_in = re.search(r"::test_\w+@\S+ (PASSED|FAILED|SKIPPED)", text)
    assert first_stand_in, text
    assert host_test < first_stand_in.start(), "the host's tests run while the guests do, not after"
    if require:  # a kernel test skipped in the guest for another reason fails the run
        result.assert_outcomes(passed=1 + n + c, failed=2 * n, skipped=n - c)
        result.stdout.fnmatch_lines(["*skipped in the guest: *a reason from the guest*"])
    else:
        result.assert_outcomes(passed=1 + n + c, failed=n, skipped=2 * n - c)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*assert (1 + 1) == 3*"])

    if require:
        return
    # -k selects by image: one guest boots, for the tests of that image only
    label = os.path.basename(images[0])
    only = _nested_run(pytester, images, "-k", f"passes and {label} and not {label}-")

    only.assert_outcomes(passed=1)
    only.stdout.fnmatch_lines([f"user_events kernel tests: 1 ran in the qemu guest on {label}, 0*"])
    booted = re.findall(
        r"user_events: (\d+) kernel tests in qemu guests, on (.*) \(", only.stdout.str()
    )
    assert booted == [("1", images[0])], only.stdout.str()


NATIVE_TESTS = """
import pytest
from testbed.pytest_plugin import kernel_has_multi_format

@pytest.mark.kernel
@pytest.mark.multi_format
def test_needs_multi_format():
    pass

@pytest.mark.kernel
def test_fails_natively():
    assert False, f"multi_format={kernel_has_multi_format()}"

@pytest.mark.kernel
def test_skips_natively():
    pytest.skip("another reason")
"""


@pytest.mark.skipif(
    not KERNEL_IMAGES or any(guest.unavailable_reason(image) for image in KERNEL_IMAGES),
    reason="needs kernel images (the guest is the host with user_events here)",
)
def test_native_mode_runs_once_and_skips_multi_format_tests_where_refused(pytester):
    """Inside the guest, the test bed sees user_events and root: it runs kernel tests
    natively, skips multi_format tests where the kernel refuses the flag, and with
    --require-kernel fails a test that skips for any other reason."""
    pytester.makepyfile(test_native=NATIVE_TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    kernel: needs user_events\n")
    argv = [sys.executable, "-m", "pytest", "-p", "testbed.pytest_plugin", "-p", "no:cacheprovider"]
    argv += ["-rs", "--color=no", "--require-kernel"]
    env = {"PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}

    for image in KERNEL_IMAGES:
        run = guest.run(image, argv, cwd=pytester.path, env=env, timeout=600)

        found = re.search(r"multi_format=(True|False)", run.output)
        assert found, run.console[-3000:]
        has = found.group(1) == "True"
        assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.output
        assert "--require-kernel: skipped: another reason" in run.output
        assert f"user_events kernel tests: {1 + has} ran natively, {2 - has} skipped" in run.output
        refused = "test_native.py: needs USER_EVENT_REG_MULTI_FORMAT (Linux 6.9+)"
        assert (refused in run.output) is not has, run.output
        assert ("2 failed, 1 passed" if has else "2 failed, 1 skipped") in run.output, run.output


MULTI_FORMAT_ONLY = """
import pytest

@pytest.mark.kernel
@pytest.mark.multi_format
def test_needs_multi_format():
    pass
"""


@pytest.mark.skipif(
    GUEST_BED_UNAVAILABLE, reason="needs a host without user_events and kernel images"
)
def test_require_kernel_fails_when_an_image_ran_no_kernel_test(pytester):
    """With only multi-format tests, a kernel without MULTI_FORMAT runs none of them: its
    skips are the declared ones, but an image where nothing ran still fails the run."""
    pytester.makepyfile(test_multi=MULTI_FORMAT_ONLY)

    result = _nested_run(pytester, KERNEL_IMAGES, "--require-kernel")

    text = result.stdout.str()
    refused = [
        os.path.basename(image)
        for image in KERNEL_IMAGES
        if f"test_needs_multi_format@{os.path.basename(image)} SKIPPED" in text
    ]
    for label in refused:
        result.stdout.fnmatch_lines([
            f"user_events kernel tests: 0 ran in the qemu guest on {label}, 1 skipped",
            f"*--require-kernel is set and no kernel test ran on {label}*",
        ])  # fmt: skip
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if refused else pytest.ExitCode.OK)
    assert "skipped for another reason" not in text


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


def test_kernel_images_come_from_the_environment_separated_by_pathsep(pytester, tmp_path):
    """``USER_EVENTS_KERNEL=A:B`` names two images; a missing one makes the bed unavailable
    and says which."""
    pytester.makepyfile(test_unrunnable=UNRUNNABLE)
    pytester.makeini("[pytest]\nmarkers =\n    kernel: needs user_events\n")
    pytester._monkeypatch.setenv("PYTHONPATH", str(ROOT))
    present = tmp_path / "bzImage-present"
    present.write_bytes(b"not booted")
    missing = tmp_path / "bzImage-missing"
    images = os.pathsep.join([str(present), str(missing)])
    pytester._monkeypatch.setenv(guest.KERNEL_ENV, images)
    pytester._monkeypatch.delenv("USER_EVENTS_REQUIRE_KERNEL", raising=False)

    result = pytester.runpytest_subprocess("-p", "testbed.pytest_plugin", "-rs", timeout=120)

    if native_unavailable_reason() is None:
        pytest.skip("this host has user_events: the images are not used")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([f"*{missing} is not a file*"])
    assert f"{present} is not a file" not in result.stdout.str()
