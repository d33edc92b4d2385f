# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""testbed/readme_samples.py on the host: README.rst and docs/reader.rst mark each sample
once, the normaliser blanks what varies between runs and nothing else, and ``--write``
rewrites only the marked blocks. tests/kernel/test_drop_in.py compares the blocks with
fresh runs."""

from __future__ import annotations

import re

import pytest

from testbed import readme_samples
from testbed.readme_samples import SAMPLES, blocks, differences, documented, rewrite, shown

TEXT = documented()


def another_run(lines: list[str]) -> list[str]:
    """``lines`` as another run would print them: every id, time, duration, count of
    records and path different."""
    text = "\n".join(lines)
    text = re.sub(r"[0-9a-f]{32}", "0123456789abcdef0123456789abcdef", text)
    text = re.sub(r"(span(_id)?=)[0-9a-f]{16}", r"\g<1>fedcba9876543210", text)
    text = re.sub(r"\d+\.\d+ (ms|µs|s)\b", "987.6 µs", text)
    text = re.sub(r"\d\d:\d\d:\d\d\.\d+Z", "01:02:03.456789Z", text)
    text = text.replace("/src/opentelemetry-exporter-userevents", "/home/someone/checkout")
    text = re.sub(r"\d+ records in", "23 records in", text)
    text = re.sub(r"from checkout \(\d+\)", "from checkout (21)", text)
    text = re.sub(r"pidns\d+", "pidns4026532000", text)
    text = re.sub(r"(_ns=0x)[0-9a-f]+ \(\d+\)", r"\g<1>1 (1)", text)
    text = re.sub(
        r"resource_id=0x\w+ \(\d+\)", "resource_id=0xa2aed2a3ac9df68e (-6724205593200036210)", text
    )
    text = re.sub(r"(url.path=|\"url.path\":\")/cart/\d", r"\g<1>/cart/7", text)
    text = re.sub(r"python\S*-\d+ +\[\d+\]", "python3-123 [001]", text)
    return text.splitlines()


def readme_as_printed() -> dict[str, list[str]]:
    return {name: another_run(shown(TEXT, name)) for name in SAMPLES}


def test_each_sample_is_marked_once_before_a_literal_block_with_lines():
    marked = blocks(TEXT)
    assert sorted(marked) == sorted(SAMPLES)
    for name in SAMPLES:
        assert shown(TEXT, name), name
        assert all(line == line.rstrip() for line in shown(TEXT, name))


def test_what_varies_between_runs_is_no_difference():
    fresh = readme_as_printed()
    assert fresh != {name: shown(TEXT, name) for name in SAMPLES}, "the run differs"
    assert differences(TEXT, fresh) == {}


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        ("quick-start", ", from checkout (", ", by service ("),  # the summary's wording
        ("quick-start", "6 spans and 3 logs", "6 spans and 2 logs"),
        ("ready-line", "Ctrl-C or SIGTERM stops it", "Ctrl-C stops it"),
        ("trace-pipe", "status_code=(0)", "status_code=(2)"),
        ("kernel-view", "; clocksource tsc", ""),
        ("kernel-view", "└─ SELECT cart", "└─ SELECT basket"),
    ],
)
def test_a_sample_edited_by_hand_to_a_wrong_one_is_a_difference(name, old, new):
    assert old in "\n".join(shown(TEXT, name))
    found = differences(edit_in(name, old, new), readme_as_printed())
    assert list(found) == [name]
    assert "-" in found[name] and "+" in found[name]


def edit_in(name: str, old: str, new: str) -> str:
    """``TEXT`` with ``old`` replaced in sample ``name``'s block only."""
    first, end, _ = blocks(TEXT)[name]
    lines = TEXT.splitlines()
    lines[first:end] = [line.replace(old, new) for line in lines[first:end]]
    return "\n".join(lines) + "\n"


def test_a_sample_not_marked_or_marked_twice_is_said():
    unmarked = TEXT.replace(".. sample: ready-line", ".. a comment", 1)
    assert differences(unmarked, readme_as_printed()) == {"ready-line": "not marked"}
    twice = TEXT.replace(".. sample: kernel-view", ".. sample: ready-line", 1)
    with pytest.raises(AssertionError, match="twice"):
        blocks(twice)


def test_write_replaces_the_marked_blocks_and_nothing_else():
    fresh = {name: [f"{name} line {n}" for n in range(3)] for name in SAMPLES}
    written = rewrite(TEXT, fresh)
    for name in SAMPLES:
        assert shown(written, name) == fresh[name]
    assert differences(written, fresh) == {}
    again = rewrite(written, {name: shown(TEXT, name) for name in SAMPLES})
    assert again == TEXT


def test_the_normaliser_keeps_the_kernel_views_shape_and_drops_its_intervals():
    lines = shown(TEXT, "kernel-view")
    normalised = readme_samples.normalise(lines)
    assert not any("◦" in line for line in normalised)
    assert sum("⚙" in line for line in normalised) == sum("⚙" in line for line in lines) > 0
