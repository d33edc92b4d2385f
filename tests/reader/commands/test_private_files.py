# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Every file the reader creates (it runs as root) is 0600 whatever the umask, and never
written through a symlink or into a file with other hard links: ``--output``, the
``--capture`` trace.dat and its spools, ``--ready-file``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from opentelemetry_exporter_userevents.reader import cli
from opentelemetry_exporter_userevents.reader.capture import TraceDatWriter
from opentelemetry_exporter_userevents.reader.private_file import (
    PrivateFileError,
    create_private,
    open_private,
)
from tests.support.captures import HEADER_EVENT
from tests.support.pages import HEADER_PAGE, data_event, page


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o002], ids=["umask-000", "umask-022", "umask-002"])
def umask(request):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


@pytest.mark.parametrize("mode", ["w", "wb", "w+b"])
def test_a_new_file_is_0600_whatever_the_umask(tmp_path, umask, mode):
    path = tmp_path / "out"
    with open_private(str(path), mode) as f:  # type: ignore[call-overload]
        f.write("x" if mode == "w" else b"x")
    assert _mode(path) == 0o600 and path.read_bytes() == b"x"


def test_an_existing_file_is_truncated_and_made_0600(tmp_path, umask):
    path = tmp_path / "out"
    path.write_text("old contents, longer than the new")
    path.chmod(0o666)
    with open_private(str(path)) as f:
        f.write("new")
    assert _mode(path) == 0o600 and path.read_text() == "new"


def test_a_symlink_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep me")
    target.chmod(0o644)
    link = tmp_path / "out"
    link.symlink_to(target)
    with pytest.raises(PrivateFileError) as raised:
        open_private(str(link))
    assert str(raised.value) == (
        f"{link}: is a symbolic link: not writing through it (remove it or choose another path)"
    )
    assert target.read_text() == "keep me" and _mode(target) == 0o644
    assert link.is_symlink()


def test_a_dangling_symlink_is_refused_and_nothing_is_created(tmp_path):
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "would-be-created")
    with pytest.raises(PrivateFileError, match="symbolic link"):
        open_private(str(link))
    assert not (tmp_path / "would-be-created").exists()


def test_a_file_with_other_hard_links_is_refused_before_it_is_truncated(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep me")
    os.link(target, tmp_path / "out")
    with pytest.raises(PrivateFileError, match="1 other hard links"):
        create_private(str(tmp_path / "out"))
    assert target.read_text() == "keep me"


def test_a_device_is_written_as_it_is_and_keeps_its_mode():
    before = os.stat("/dev/null").st_mode
    with open_private("/dev/null") as f:
        f.write("nothing")
    assert os.stat("/dev/null").st_mode == before


def test_the_descriptor_is_close_on_exec(tmp_path):
    fd = create_private(str(tmp_path / "out"))
    try:
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)


def test_the_trace_dat_and_its_spools_are_private(tmp_path, umask):
    path = tmp_path / "capture.dat"
    writer = TraceDatWriter(str(path), 4096, HEADER_PAGE, HEADER_EVENT)
    writer.add_page(0, page(1000, [data_event(0, b"\1\0\0\0")]))
    writer.add_page(1, page(1001, [data_event(0, b"\1\0\0\0")]))
    spools = Path(writer.spool_dir)
    assert _mode(spools) == 0o700
    assert {p.name: _mode(p) for p in spools.iterdir()} == {"cpu0": 0o600, "cpu1": 0o600}
    writer.close()
    assert _mode(path) == 0o600 and not spools.exists()


def test_cli_output_is_private_and_a_symlink_is_refused(tmp_path, capsys, umask):
    capture = tmp_path / "capture.dat"
    writer = TraceDatWriter(str(capture), 4096, HEADER_PAGE, HEADER_EVENT)
    writer.close()
    output = tmp_path / "spans.jsonl"
    assert cli.main(["decode", str(capture), "-o", str(output)]) == 0
    assert _mode(output) == 0o600

    target = tmp_path / "precious"
    target.write_text("keep me")
    output.unlink()
    output.symlink_to(target)
    capsys.readouterr()
    assert cli.main(["decode", str(capture), "-o", str(output)]) == 1
    err = capsys.readouterr().err
    assert err == f"otel-userevents: {output}: is a symbolic link: not writing through it " \
                  "(remove it or choose another path)\n"  # fmt: skip
    assert target.read_text() == "keep me"
