# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""README.rst is where a user starts (issue 45): short, in the order a user needs it, and
every page it links to exists and is in the Sphinx site's tables of contents (CI builds the
site with warnings as errors; this checks the links without Sphinx)."""

from __future__ import annotations

import re

from tests.support.readme_commands import DOCS, README

SECTIONS = [
    "Check your kernel",
    "Install",
    "Exporting spans and logs",
    "Run the reader on a real host",
    "Quick start",
    "Performance",
    "Documentation",
]


def _sections(text: str) -> list[str]:
    lines = text.splitlines()
    return [
        lines[n] for n in range(len(lines) - 1)
        if lines[n] and re.fullmatch(r"-{3,}", lines[n + 1])
    ]  # fmt: skip


def test_the_readme_is_a_first_screen_in_a_users_order():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert _sections(text) == SECTIONS
    why = text.split("Check your kernel\n", 1)[0]
    assert "nobody listens" in why and "Stock tools read the fields" in why


def test_every_page_the_readme_links_exists_and_is_in_the_site():
    text = README.read_text(encoding="utf-8")
    linked = set(re.findall(r"<docs/([\w.-]+)>`_", text))
    assert linked and all((DOCS / name).is_file() for name in linked), linked
    index = (DOCS / "index.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"^   ([\w-]+)$", index, re.M))
    pages = {p.stem for p in DOCS.iterdir() if p.suffix in (".rst", ".md")} - {"index"}
    assert pages == listed
    assert {name.rsplit(".", 1)[0] for name in linked} <= listed
