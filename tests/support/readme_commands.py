# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The shell lines of README.rst's sections, as an operator copies them: each
``.. code-block:: sh`` (or ``shell``, ``bash``, ``console``) and each ``::`` literal block,
line by line. Tests run them as written (tests/test_readme_commands.py on the host,
tests/kernel/test_drop_in.py on user_events), so they break when the README drifts."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.rst"

QUICK_START = "Quick start"
INSTALL = "Install"  # from a clone and from a wheel
CHECK_KERNEL = "Check your kernel"  # one command, and what each answer means
EXPORTING = "Exporting spans and logs"  # the drop-in line and "Watch them"
DOCS = ROOT / "docs"


def documentation() -> str:
    """README.rst and the reference in docs/ (where README's sections moved), as one text,
    for the tests that check what the documentation says wherever it says it."""
    pages = [README, *sorted(DOCS.glob("*.rst")), *sorted(DOCS.glob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


_SHELL = re.compile(r"^(\s*)\.\. code-block:: *(sh|shell|bash|console)\s*$")
_OTHER_BLOCK = re.compile(r"^(\s*)\.\. code-block::")


def section(title: str, text: str | None = None) -> list[str]:
    """The lines of a top-level section (underlined with ``-``), its subsections included."""
    lines = (README.read_text() if text is None else text).splitlines()
    heading = [
        n for n in range(len(lines) - 1)
        if lines[n] and re.fullmatch(r"-{3,}", lines[n + 1]) and len(lines[n + 1]) >= len(lines[n])
    ]  # fmt: skip
    starts = [n for n in heading if lines[n] == title]
    assert len(starts) == 1, f"README.rst has {len(starts)} sections named {title!r}"
    start = starts[0] + 2
    end = next((n for n in heading if n > start), len(lines))
    return lines[start:end]


def shell_blocks(title: str, text: str | None = None) -> list[list[str]]:
    """Each shell block of the section, as its lines with the block's indentation removed
    (blank lines left out). A line continued with a backslash is refused: the tests run
    one line at a time."""
    lines = section(title, text)
    blocks: list[list[str]] = []
    n = 0
    while n < len(lines):
        line = lines[n]
        shell = _SHELL.match(line)
        literal = (
            line.rstrip().endswith("::")
            and not _OTHER_BLOCK.match(line)
            and not line.lstrip().startswith("..")
        )
        n += 1
        if not shell and not literal:
            continue
        indent = len(line) - len(line.lstrip())
        body: list[str] = []
        while n < len(lines) and lines[n].strip().startswith(":") and shell:
            n += 1  # directive options
        while n < len(lines) and (
            not lines[n].strip() or len(lines[n]) - len(lines[n].lstrip()) > indent
        ):
            body.append(lines[n])
            n += 1
        content = [x for x in body if x.strip()]
        if not content:
            continue
        margin = min(len(x) - len(x.lstrip()) for x in content)
        block = [x[margin:].rstrip() for x in content]
        assert not any(x.endswith("\\") for x in block), f"a continued line: {block}"
        blocks.append(block)
    return blocks


def shell_lines(title: str, text: str | None = None) -> list[str]:
    return [line for block in shell_blocks(title, text) for line in block]


def needs_user_events(line: str) -> bool:
    """Lines that only work on a kernel with user_events, as root: they run in the kernel
    tests. Every other line runs on the host (tests/test_readme_commands.py)."""
    return (
        "opentelemetry-instrument " in line
        or "/sys/kernel/tracing" in line
        or ("examples/app.py" in line and "testbed" not in line)
    )
