# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""README.rst's quick start, install and drop-in sections, run line by line as an operator copies
them (tests/support/readme_commands.py reads the blocks out of the file). The lines that
need user_events run in tests/kernel/test_drop_in.py; every other line runs here, on the
host, in a copy of this checkout.

What a test must change, and nothing else:

- the checkout is a copy in a temporary directory (``python3 -m venv .venv`` must not
  replace the environment running the tests), with ``../shared`` beside it a link to this
  checkout's ``../shared`` (the kernel images the README names "in this workplace");
- ``/opt/otel-userevents``, the wheel's environment, is a temporary directory;
- the test suite's command gets ``--collect-only`` (it would run this test inside itself),
  without CI's ``USER_EVENTS_REQUIRE_KERNEL`` (a collection runs no kernel test, which that
  setting counts as a failure):
  what is checked is that it collects every kernel test once per image.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from testbed.pytest_plugin import REQUIRE_ENV
from tests.support.readme_commands import (
    CHECK_KERNEL,
    EXPORTING,
    INSTALL,
    QUICK_START,
    README,
    ROOT,
    needs_user_events,
    section,
    shell_blocks,
    shell_lines,
)

WHEEL_ENVIRONMENT = "/opt/otel-userevents"
SHARED = ROOT.parent / "shared"


def test_every_shell_line_is_run_by_a_test_and_every_enable_is_undone():
    """Each line is the host test's or the kernel tests' (a line of neither kind would be
    run by none); a recipe that enables tracepoints gives the line that disables them."""
    lines = shell_lines(QUICK_START) + shell_lines(INSTALL) + shell_lines(EXPORTING)
    kernel = [line for line in lines if needs_user_events(line)]
    drop_in = [line for line in kernel if "opentelemetry-instrument " in line]
    watch = [line for block in shell_blocks(EXPORTING) for line in block if "trace_pipe" in line]
    assert len(drop_in) == 1, "the kernel test runs one drop-in line"
    assert len(watch) == 1, "the kernel test runs one trace_pipe recipe"
    enables = [line for line in kernel if re.fullmatch(r"echo 1 \| tee \S+/enable", line)]
    assert enables, "the recipe enables tracepoints with 'echo 1 | tee .../enable'"
    for enable in enables:
        disable = enable.replace("echo 1 ", "echo 0 ", 1)
        assert disable in kernel[kernel.index(enable) :], f"nothing undoes {enable!r}"


def copy_of_the_checkout(destination: Path) -> None:
    """The files git knows of (tracked, and new ones not ignored), or, outside a git
    checkout of its own (an sdist, or a copy inside another checkout's ignored build/), the
    tree without environments and builds."""
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True, text=True
    )
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    own = top.returncode == 0 and Path(top.stdout.strip()).resolve() == ROOT.resolve()
    if listed.returncode != 0 or not own:
        ignore = shutil.ignore_patterns(".venv", "dist", "build", "__pycache__", ".git")
        shutil.copytree(ROOT, destination, ignore=ignore, symlinks=True)
        return
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


@pytest.mark.skipif(
    not (SHARED / "kernel" / "bzImage").is_file() or shutil.which("qemu-system-x86_64") is None,
    reason="the quick start needs ../shared/kernel/bzImage and qemu-system-x86_64",
)
def test_the_quick_start_lines_work_as_written(tmp_path):
    checkout = tmp_path / "checkout"
    copy_of_the_checkout(checkout)
    (tmp_path / "shared").symlink_to(SHARED)
    wheel_environment = tmp_path / "otel-userevents"
    left_out = ("VIRTUAL_ENV", "PYTHONPATH", REQUIRE_ENV)  # CI's: a collection runs no test
    env = {k: v for k, v in os.environ.items() if k not in left_out}
    lines = [
        line
        for line in shell_lines(QUICK_START) + shell_lines(INSTALL)
        if not needs_user_events(line)
    ]
    installs = [line for line in lines if "pip install -e '.[reader]'" in line]
    wheels = [line for line in lines if "dist/" in line and "[reader]" in line]
    assert installs and wheels, "the quick start installs from a clone and from a wheel"

    outputs = []
    for line in lines:
        command = line.replace(WHEEL_ENVIRONMENT, str(wheel_environment))
        if re.search(r" -m pytest$", command):
            command += " --collect-only -q"
        done = subprocess.run(
            ["sh", "-c", command], cwd=checkout, env=env, capture_output=True, text=True,
            timeout=1800,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        outputs.append((line, done.stdout + done.stderr))

    # from the clone: the reader's command and opentelemetry-instrument
    venv = checkout / ".venv" / "bin"
    subprocess.run([venv / "otel-userevents", "--help"], check=True, capture_output=True)
    assert (venv / "opentelemetry-instrument").is_file()
    # from the wheel: the package in its own environment, not the clone, with the extra
    shown = subprocess.run(
        [wheel_environment / "bin" / "python", "-c",
         "import opentelemetry_exporter_userevents as m, opentelemetry.exporter.otlp.proto"
         ".common as c; print(m.__file__)"],
        cwd=tmp_path, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    assert shown.startswith(str(wheel_environment)), shown
    subprocess.run(
        [wheel_environment / "bin" / "otel-userevents", "--help"], check=True, capture_output=True
    )
    # the example in the guest, and the suite's command with every kernel test per image
    (example,) = [out for line, out in outputs if "examples/record_app.py" in line]
    assert re.search(r", lost 0, 6 spans and 3 logs rebuilt, ", example), example[-3000:]
    (suite,) = [out for line, out in outputs if line.endswith("-m pytest")]
    per_image = {
        i: len(re.findall(rf"@{i}>", suite)) for i in ("bzImage", "bzImage-no-multi-format")
    }
    assert per_image["bzImage"] > 0 and len(set(per_image.values())) == 1, per_image
    assert "error" not in suite.splitlines()[-1].lower(), suite[-2000:]


def test_the_kernel_check_answers_here_as_the_readme_says():
    """The check's one line, run here: this host's answer is one README explains (on a
    kernel with user_events, tests/kernel/test_drop_in.py runs it too)."""
    (line,) = shell_lines(CHECK_KERNEL)
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60)
    text = " ".join(" ".join(section(CHECK_KERNEL, README.read_text())).split())
    if done.returncode == 0:
        assert done.stdout.strip() == "/sys/kernel/tracing/user_events_data"
        assert "It prints the path: user_events is here." in text
    else:
        answer = "No such file or directory" if os.geteuid() == 0 else "Permission denied"
        answer = "Permission denied" if "Permission denied" in done.stderr else answer
        assert answer in done.stderr, done.stderr
        assert f"``{answer}``" in text
