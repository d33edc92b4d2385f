# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""testbed/build-kernel.sh builds the configuration of the shipped test images.

The fragment it merges into tinyconfig is testbed/user-events.config, which must equal the
one the images in ../shared/kernel were built with (when that directory is present), and
the script must merge exactly that file: a fake kernel tree with stub ``make`` and
``merge_config.sh`` records what the script hands them, so no kernel is built here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "testbed" / "build-kernel.sh"
FRAGMENT = ROOT / "testbed" / "user-events.config"
SHARED = ROOT.parent / "shared" / "kernel" / "user-events.config"

# what the tests and the README need from the images (../shared/kernel/README.md)
NEEDED = [
    "CONFIG_USER_EVENTS=y",
    "CONFIG_HIST_TRIGGERS=y",
    "CONFIG_SYNTH_EVENTS=y",
    "CONFIG_NAMESPACES=y",
    "CONFIG_PID_NS=y",
    "CONFIG_USER_NS=y",
    "CONFIG_CGROUPS=y",
    "CONFIG_MEMCG=y",
    "CONFIG_FTRACE_SYSCALLS=y",
    "CONFIG_KPROBE_EVENTS=y",
    "CONFIG_SCHEDSTATS=y",
]


def test_fragment_is_the_shipped_images_fragment() -> None:
    if not SHARED.is_file():
        pytest.skip(f"{SHARED} is not here (it is outside this repository)")
    assert FRAGMENT.read_bytes() == SHARED.read_bytes(), (
        f"{FRAGMENT.relative_to(ROOT)} differs from {SHARED}: copy it, so that "
        "testbed/build-kernel.sh builds the images the tests run on"
    )


def test_fragment_is_well_formed_and_has_what_the_tests_need() -> None:
    lines = FRAGMENT.read_text().splitlines()
    names = []
    for line in lines:
        assert re.fullmatch(r'CONFIG_[A-Z0-9_]+=(y|n|m|[0-9]+|"[^"]*")', line), line
        names.append(line.split("=", 1)[0])
    assert len(names) == len(set(names)), "an option is set twice"
    for option in NEEDED:
        assert option in lines


def test_the_script_has_no_fragment_of_its_own() -> None:
    text = SCRIPT.read_text()
    assert "user-events.config" in text
    # no option of its own: only the --no-multi-format local version, and the check that
    # user_events is in the final .config
    options = set(re.findall(r"(CONFIG_[A-Z0-9_]+)=(?:y|m|n|\")", text))
    assert options <= {"CONFIG_LOCALVERSION", "CONFIG_USER_EVENTS"}, options


def test_bash_parses_the_script() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)


@pytest.fixture
def fake_kernel(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A kernel tree whose make and merge_config.sh only record what they were given."""
    source = tmp_path / "linux"
    (source / "scripts" / "kconfig").mkdir(parents=True)
    (source / "include" / "uapi" / "linux").mkdir(parents=True)
    (source / "Makefile").write_text("# fake\n")
    (source / "include" / "uapi" / "linux" / "user_events.h").write_text(
        "enum user_reg_flag {\n\tUSER_EVENT_REG_MAX\t\t= 1U << 2,\n};\n"
    )
    seen = tmp_path / "seen"
    seen.mkdir()
    # merge_config.sh -m -O OBJ BASE FRAGMENT: keep the fragment, append it to .config
    _stub(
        source / "scripts" / "kconfig" / "merge_config.sh",
        f"""\
        cp "$5" {seen}/fragment
        cat "$5" >> "$4"
        """,
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # make -C SRC O=OBJ ARCH=x86_64 -jN TARGET
    _stub(
        bin_dir / "make",
        f"""\
        obj=; for a; do case $a in O=*) obj=${{a#O=}} ;; esac; target=$a; done
        echo "$target" >> {seen}/targets
        case $target in
          tinyconfig) echo '# Linux/x86 6.12.0 Kernel Configuration' > "$obj/.config" ;;
          bzImage) mkdir -p "$obj/arch/x86/boot"; echo image > "$obj/arch/x86/boot/bzImage" ;;
        esac
        """,
    )
    # every build dependency "installed", and no apt run
    _stub(bin_dir / "dpkg-query", "echo 'install ok installed'\n")
    _stub(bin_dir / "apt-get", f'echo apt-get "$@" >> {seen}/apt\n')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp_path)}
    return source, seen, env


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("no_multi_format", [False, True])
def test_the_script_merges_the_checked_in_fragment(
    fake_kernel: tuple[Path, Path, dict[str, str]], tmp_path: Path, no_multi_format: bool
) -> None:
    source, seen, env = fake_kernel
    out = tmp_path / "out" / "bzImage"
    argv = ["bash", str(SCRIPT), str(out), "--source", str(source), "--jobs", "1"]
    if no_multi_format:
        argv.append("--no-multi-format")
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not (seen / "apt").exists()
    assert (seen / "targets").read_text().split() == ["tinyconfig", "olddefconfig", "bzImage"]
    merged = (seen / "fragment").read_text()
    expected = FRAGMENT.read_text()
    if no_multi_format:
        expected += 'CONFIG_LOCALVERSION="-no-multi-format"\n'
    assert merged == expected
    assert out.read_text() == "image\n"
    config = out.parent / ("full-no-multi-format.config" if no_multi_format else "full.config")
    assert config.read_text().endswith(expected)
    assert "did not stick" not in result.stderr
    # the caller's tree is left as it was
    header = source / "include" / "uapi" / "linux" / "user_events.h"
    assert "1U << 2," in header.read_text()
