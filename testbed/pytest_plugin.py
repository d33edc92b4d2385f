# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""pytest plugin: tests marked ``kernel`` run on a real user_events kernel.

- Natively, when this host has user_events and the rights (root).
- Otherwise in one qemu guest booted from ``USER_EVENTS_KERNEL``: the host collects,
  the guest runs those tests with this same plugin recording each result to a file,
  and every kernel test on the host takes its guest's outcome (a guest failure fails
  the host run, with the guest's report).
- Otherwise they are skipped with the reason; with ``--require-kernel`` (or
  ``USER_EVENTS_REQUIRE_KERNEL=1``) they fail instead, and so does a run in which no
  kernel test ran.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from opentelemetry_exporter_userevents.abi import UserEventsData
from testbed import guest

GUEST_ENV = "USER_EVENTS_TESTBED_GUEST"
RESULTS_FILE = "testbed-results.jsonl"
REQUIRE_ENV = "USER_EVENTS_REQUIRE_KERNEL"
FORWARDED_ENV = ("USER_EVENTS_LOAD_SPANS",)
"""Test settings passed on to the guest."""
_TESTBED_ROOT = str(Path(guest.__file__).resolve().parent.parent)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("user_events", "user_events kernel test bed")
    group.addoption(
        "--kernel-image",
        default=os.environ.get(guest.KERNEL_ENV),
        help=f"bzImage with CONFIG_USER_EVENTS=y for the qemu guest (${guest.KERNEL_ENV})",
    )
    group.addoption(
        "--require-kernel",
        action="store_true",
        default=os.environ.get(REQUIRE_ENV, "").lower() in ("1", "true", "yes"),
        help=f"fail, not skip, when kernel tests cannot run (${REQUIRE_ENV}=1)",
    )
    group.addoption(
        "--guest-timeout", type=float, default=2400, help="seconds for the whole guest run"
    )


def pytest_configure(config: pytest.Config) -> None:
    image = config.getoption("kernel_image")
    if image:  # the guest and nested runs may start elsewhere
        config.option.kernel_image = os.path.abspath(
            os.path.join(config.invocation_params.dir, image)
        )
    config.pluginmanager.register(KernelTestBed(config), "user_events_testbed")


def native_unavailable_reason() -> str | None:
    """Why kernel tests cannot run natively on this host, or None if they can."""
    data = UserEventsData()
    try:
        if not data.available:
            return data.reason
    finally:
        data.close()
    if os.geteuid() != 0:
        return "kernel tests need root (they enable events and read tracefs)"
    return None


class GuestFailure(Exception):
    """A kernel test that failed in the guest; its text is the guest's report."""


class GuestItem(pytest.Item):
    """Stands on the host for a kernel test that runs in the guest."""

    def __init__(self, *, bed: KernelTestBed, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bed = bed

    def runtest(self) -> None:
        result = self.bed.guest_result(self.nodeid)
        outcome = result.get("outcome")
        if outcome == "passed":
            return
        if outcome == "skipped":
            if self.bed.require:
                raise GuestFailure(f"skipped in the guest: {result.get('report')}")
            pytest.skip(f"in the guest: {result.get('report')}")
        raise GuestFailure(result.get("report") or "no report")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, GuestFailure):
            return f"[ran in the user_events qemu guest]\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name} [user_events guest]"


class KernelTestBed:
    """Decides where kernel tests run, runs the guest once, and counts what ran."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.require: bool = config.getoption("require_kernel")
        self.in_guest = os.environ.get(GUEST_ENV) == "1"
        self.results_path = (
            os.path.join(os.environ["TESTBED_SHARE"], RESULTS_FILE) if self.in_guest else None
        )
        self.mode = "none"
        self.guest_nodeids: list[str] = []
        self.guest_results: dict[str, dict[str, Any]] | None = None
        self.guest_failure: str | None = None
        self.unavailable_reason = ""
        self.ran = 0
        self.not_ran = 0

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        kernel_items = [item for item in items if item.get_closest_marker("kernel")]
        if not kernel_items or self.in_guest:
            return
        native = native_unavailable_reason()
        if native is None:
            self.mode = "native"
            return
        image = config.getoption("kernel_image")
        guest_reason = guest.unavailable_reason(image)
        if guest_reason is None:
            self.mode = "guest"
            for position, item in enumerate(items):
                if item in kernel_items:
                    stand_in = GuestItem.from_parent(item.parent, name=item.name, bed=self)
                    stand_in.own_markers = list(item.own_markers)
                    stand_in.keywords.update(item.keywords)
                    items[position] = stand_in
                    self.guest_nodeids.append(stand_in.nodeid)
            return
        self.mode = "unavailable"
        self.unavailable_reason = (
            f"no user_events kernel: natively, {native}; in a guest, {guest_reason}"
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.mode == "unavailable" and item.get_closest_marker("kernel"):
            if self.require:
                pytest.fail(f"--require-kernel: {self.unavailable_reason}", pytrace=False)
            pytest.skip(self.unavailable_reason)

    def guest_result(self, nodeid: str) -> dict[str, Any]:
        if self.guest_results is None:
            self._run_guest()
        assert self.guest_results is not None
        if nodeid in self.guest_results:
            return self.guest_results[nodeid]
        return {"outcome": "failed", "report": self.guest_failure or "no result from the guest"}

    def _run_guest(self) -> None:
        rootdir = str(self.config.rootpath)
        argv = [sys.executable, "-m", "pytest", "-p", "testbed.pytest_plugin"]
        argv += ["-p", "no:cacheprovider", "-q", "-rs", "--color=no"]
        argv += ["--rootdir", rootdir]
        if self.config.inipath:
            argv += ["-c", str(self.config.inipath)]
        argv += self.guest_nodeids
        collected: dict[str, dict[str, Any]] = {}

        def read_results(share: Path) -> None:
            path = share / RESULTS_FILE
            if path.exists():
                for line in path.read_text().splitlines():
                    record = json.loads(line)
                    collected[record["nodeid"]] = record

        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"user_events: running {len(self.guest_nodeids)} kernel tests in a qemu guest "
                f"({self.config.getoption('kernel_image')})"
            )
        run = guest.run(
            self.config.getoption("kernel_image"),
            argv,
            cwd=rootdir,
            env={
                GUEST_ENV: "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                **{name: os.environ[name] for name in FORWARDED_ENV if name in os.environ},
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [_TESTBED_ROOT, os.environ.get("PYTHONPATH")])
                ),
            },
            timeout=self.config.getoption("guest_timeout"),
            keep=read_results,
        )
        self.guest_results = collected
        missing = [n for n in self.guest_nodeids if n not in collected]
        if missing or run.returncode not in (0, 1):
            self.guest_failure = (
                f"the guest pytest ended with {run.returncode} before this test reported; "
                f"last console output:\n{run.console[-6000:]}"
            )

    # --- in the guest (or natively): record each test's result ---------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if item.get_closest_marker("kernel") is None:
            return
        # Only an executed test body counts as ran: a setup error or skip does not.
        if report.when == "call" and not report.skipped:
            self.ran += 1
        elif report.skipped and report.when in ("setup", "call"):
            self.not_ran += 1
        if self.results_path:
            self._record(self.results_path, item, report)

    @staticmethod
    def _record(path: str, item: pytest.Item, report: pytest.TestReport) -> None:
        state = getattr(item, "_testbed_record", {"nodeid": item.nodeid, "outcome": "passed"})
        if report.failed:
            state["outcome"] = "failed"
            text = report.longreprtext
            for title, content in report.sections:
                text += f"\n----- {title} -----\n{content}"
            state["report"] = (state.get("report", "") + f"\n[{report.when}] " + text).strip()
        elif report.skipped and state["outcome"] == "passed":
            state["outcome"] = "skipped"
            longrepr = report.longrepr
            state["report"] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        item._testbed_record = state  # type: ignore[attr-defined]
        if report.when == "teardown":
            with open(path, "a", encoding="utf-8") as file:
                file.write(json.dumps(state) + "\n")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.in_guest or (self.mode == "none" and not self.require):
            return
        where = {"native": "natively", "guest": "in the qemu guest"}.get(self.mode, "nowhere")
        line = f"user_events kernel tests: {self.ran} ran {where}, {self.not_ran} skipped"
        if self.mode == "unavailable":
            line += f" ({self.unavailable_reason})"
        terminalreporter.write_line(line)
        if self.require and self.ran == 0:
            terminalreporter.write_line(
                "user_events: --require-kernel is set and no kernel test ran", red=True
            )

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.require and not self.in_guest and self.ran == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
