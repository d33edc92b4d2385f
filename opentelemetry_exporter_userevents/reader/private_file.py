# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Every file the reader creates: mode 0600 whatever the umask, never through a symlink.

The reader runs as root and writes what services sent (span and log contents), so its
output (``--output``), its captures (``--capture`` and their spool files) and its
``--ready-file`` are private to root. A path that is a symlink is refused (``O_NOFOLLOW``):
another user who can write the directory cannot point the reader at ``/etc/shadow``. A
regular file with other hard links is refused too, before it is truncated (with
``fs.protected_hardlinks=0`` another user could link any file there). An existing regular
file is truncated and made 0600; anything else (``/dev/null``, a FIFO) is written as it
is, its mode untouched.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import IO, BinaryIO, Literal, TextIO, overload

PRIVATE_MODE = 0o600


class PrivateFileError(OSError):
    """The path cannot be created privately (a symlink, a hard-linked file); the message
    names it and says why."""

    def __init__(self, code: int, path: str, why: str) -> None:
        super().__init__(code, why, path)

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _why_not_a_link(path: str) -> str:
    target = os.readlink(path)
    if target.startswith(("/proc/self/fd/", "/dev/fd/")) or path.startswith(
        ("/dev/fd/", "/proc/self/fd/")
    ):
        # /dev/stdout, /dev/stderr: an open descriptor, not a file to create
        return (
            "is a symbolic link to an open descriptor: not writing through it (for "
            "standard output, give -o - or no output file, the default)"
        )
    return "is a symbolic link: not writing through it (remove it or choose another path)"


def create_private(path: str, read: bool = False) -> int:
    """A descriptor of ``path``, created 0600 (or truncated and made 0600), write-only, or
    read-write with ``read``; close-on-exec. Raises :class:`PrivateFileError` for a
    symlink or a file with other hard links, ``OSError`` otherwise."""
    flags = os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_RDWR if read else os.O_WRONLY)
    try:
        fd = os.open(path, flags, PRIVATE_MODE)
    except OSError as error:
        if error.errno == errno.ELOOP and os.path.islink(path):
            raise PrivateFileError(errno.ELOOP, path, _why_not_a_link(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            if info.st_nlink > 1:
                raise PrivateFileError(
                    errno.EMLINK,
                    path,
                    f"has {info.st_nlink - 1} other hard links: not writing to it "
                    "(remove it or choose another path)",
                )
            os.ftruncate(fd, 0)  # only now: a refused file keeps its contents
            os.fchmod(fd, PRIVATE_MODE)  # the mode an existing file had is not ours to keep
    except BaseException:
        os.close(fd)
        raise
    return fd


@overload
def open_private(path: str, mode: Literal["w"] = "w") -> TextIO: ...
@overload
def open_private(path: str, mode: Literal["wb", "w+b"], buffering: int = -1) -> BinaryIO: ...
def open_private(path: str, mode: str = "w", buffering: int = -1) -> IO[str] | IO[bytes]:
    """:func:`create_private` as a file object: ``w`` (UTF-8 text), ``wb`` or ``w+b``
    (``buffering=0``: unbuffered, each write one system call)."""
    if mode not in ("w", "wb", "w+b"):
        raise ValueError(f"open_private: mode {mode!r} (w, wb or w+b)")
    fd = create_private(path, read="+" in mode)
    try:
        if mode == "w":
            return os.fdopen(fd, mode, encoding="utf-8")
        return os.fdopen(fd, mode, buffering)
    except BaseException:
        os.close(fd)
        raise
