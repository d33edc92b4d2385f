# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A benchmark's in-guest half, run from the host: the script again with ``--in-guest``
in the test bed, its JSON result brought back from the shared directory."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from testbed import guest

ROOT = Path(__file__).resolve().parent.parent


def save_result(name: str, result: Any) -> None:
    """In the guest: leave ``result`` where :func:`run_in_guest` finds it."""
    Path(os.environ["TESTBED_SHARE"], f"{name}.json").write_text(json.dumps(result))


def run_in_guest(name: str, args: list[str], timeout: float = 1800) -> tuple[int, Any, str]:
    """Run ``benchmarks/NAME.py --in-guest ARGS`` in the test bed on ``$USER_EVENTS_KERNEL``:
    (0, its result, the machine's description); else (2: no test bed, or 1: no result,
    None, "") with the reason or the guest's output printed to stderr."""
    kernel = os.environ.get(guest.KERNEL_ENV)
    reason = guest.unavailable_reason(kernel)
    if reason is not None or kernel is None:
        print(f"{name}: {reason}", file=sys.stderr)
        return 2, None, ""
    kept: dict[str, Any] = {}

    def keep(share: Path) -> None:
        path = share / f"{name}.json"
        if path.exists():
            kept["result"] = json.loads(path.read_text())

    run = guest.run(
        kernel,
        [sys.executable, f"benchmarks/{name}.py", "--in-guest", *args],
        cwd=ROOT,
        keep=keep,
        timeout=timeout,
    )
    if "result" not in kept:
        print(run.output, file=sys.stderr)
        return 1, None, ""
    return 0, kept["result"], f"qemu TCG guest, {Path(kernel).name}"
