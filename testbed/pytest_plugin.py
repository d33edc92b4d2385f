# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""pytest plugin: tests marked ``kernel`` run on a real user_events kernel.

- Natively, when this host has user_events and the rights (root): once.
- Otherwise in a qemu guest per kernel image (``USER_EVENTS_KERNEL``, several separated
  by ``os.pathsep``, or ``--kernel-image`` given more than once), all booted as soon as
  the tests are collected (``--guest-jobs``: how many at once), while the host runs its
  own tests: the host collects, each guest runs those tests with this same plugin recording
  each result to a file, and every kernel test becomes one host item per image,
  ``test_name@IMAGE``, that takes that guest's outcome (a guest failure fails the host
  run, with the guest's report and the image's name).
- Otherwise they are skipped with the reason; with ``--require-kernel`` (or
  ``USER_EVENTS_REQUIRE_KERNEL=1``) they fail instead, and so does a run in which any
  image ran no kernel test, or a kernel test was skipped for any reason but
  :data:`MULTI_FORMAT_REASON`.

Tests marked ``multi_format`` need ``USER_EVENT_REG_MULTI_FORMAT``: on a kernel that
refuses it (as 6.4 to 6.8 do) they are skipped with :data:`MULTI_FORMAT_REASON`.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from opentelemetry_exporter_userevents.abi import UserEventsData, UserEventsError, uapi
from testbed import guest

GUEST_ENV = "USER_EVENTS_TESTBED_GUEST"
RESULTS_FILE = "testbed-results.jsonl"
REQUIRE_ENV = "USER_EVENTS_REQUIRE_KERNEL"
FORWARDED_ENV = (
    "USER_EVENTS_LOAD_SPANS",
    "LINUXTRACEPOINTS_BUILD",
    "OTEL_EXPORTER_USER_EVENTS_READER_CORE",
)
"""Test settings passed on to the guest."""
GUEST_JOBS_ENV = "USER_EVENTS_GUEST_JOBS"
SLOWEST = 15
"""How many of the slowest kernel tests of each image the summary names (CI's time budget)."""
MULTI_FORMAT_REASON = (
    "needs USER_EVENT_REG_MULTI_FORMAT (Linux 6.9+); this kernel refuses it with EINVAL"
)
"""The one reason a kernel test may be skipped under ``--require-kernel``."""
_TESTBED_ROOT = str(Path(guest.__file__).resolve().parent.parent)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("user_events", "user_events kernel test bed")
    group.addoption(
        "--kernel-image",
        action="append",
        default=None,
        help="bzImage with CONFIG_USER_EVENTS=y for a qemu guest; give it again for more "
        f"images, each run in a guest of its own (${guest.KERNEL_ENV}: paths separated "
        f"by '{os.pathsep}')",
    )
    group.addoption(
        "--require-kernel",
        action="store_true",
        default=os.environ.get(REQUIRE_ENV, "").lower() in ("1", "true", "yes"),
        help=f"fail, not skip, when kernel tests cannot run (${REQUIRE_ENV}=1)",
    )
    group.addoption("--guest-timeout", type=float, default=3600, help="seconds for each guest run")
    group.addoption(
        "--guest-jobs",
        type=int,
        default=int(os.environ.get(GUEST_JOBS_ENV, "0") or 0),
        help="guests booted at once, alongside the host's tests (0, the default: one per "
        f"image; 1: one after the other; ${GUEST_JOBS_ENV})",
    )


def pytest_configure(config: pytest.Config) -> None:
    known = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    for marker, text in (
        ("kernel", "needs a kernel with CONFIG_USER_EVENTS (native or qemu test bed)"),
        ("multi_format", "needs USER_EVENT_REG_MULTI_FORMAT; skipped on kernels without it"),
    ):
        if marker not in known:  # for projects (and nested test runs) without them
            config.addinivalue_line("markers", f"{marker}: {text}")
    images = config.getoption("kernel_image")
    if images is None:
        images = [p for p in os.environ.get(guest.KERNEL_ENV, "").split(os.pathsep) if p]
    # the guest and nested runs may start elsewhere: make the paths absolute
    base = config.invocation_params.dir
    config.option.kernel_image = [os.path.abspath(os.path.join(base, p)) for p in images]
    config.pluginmanager.register(KernelTestBed(config), "user_events_testbed")


def image_label(image: str) -> str:
    """How a host item names its image: the file name (``bzImage-no-multi-format``)."""
    return os.path.basename(image) or image


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


@functools.lru_cache(maxsize=1)
def kernel_has_multi_format() -> bool:
    """Whether this kernel accepts USER_EVENT_REG_MULTI_FORMAT (Linux 6.9+), by trying it.

    Registers a throwaway event with the flag: EINVAL means the kernel refuses the flag
    (the command is valid on every kernel). The event is unregistered and deleted.
    """
    data = UserEventsData()
    if not data.available:
        raise RuntimeError(f"user_events unavailable: {data.reason}")
    name = f"testbed_multi_format_probe_{os.getpid()}"
    word = uapi.ffi.new("uint32_t *")
    address = int(uapi.ffi.cast("uintptr_t", word))
    try:
        try:
            uapi.register_ioctl(
                data.fd, f"{name} u32 a", uapi.USER_EVENT_REG_MULTI_FORMAT, address, 0
            )
        except UserEventsError as exc:
            if exc.errno == errno.EINVAL:
                return False
            raise
        uapi.unregister_ioctl(data.fd, address, 0)
        try:
            uapi.delete_ioctl(data.fd, name)
        except UserEventsError:
            pass  # deletion may lag the unregister; a leftover probe event is harmless
        return True
    finally:
        data.close()


def is_multi_format_skip(reason: str | None) -> bool:
    return bool(reason) and MULTI_FORMAT_REASON in str(reason)


class GuestFailure(Exception):
    """A kernel test that failed in the guest; its text is the guest's report."""


class GuestItem(pytest.Item):
    """Stands on the host for a kernel test that runs in the guest of one image."""

    def __init__(self, *, bed: KernelTestBed, image: str, guest_nodeid: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.bed = bed
        self.image = image
        self.guest_nodeid = guest_nodeid

    def result(self) -> dict[str, Any]:
        return self.bed.guest_result(self.image, self.guest_nodeid)

    def runtest(self) -> None:
        result = self.result()
        outcome = result.get("outcome")
        if outcome == "passed":
            return
        if outcome == "skipped":
            report = result.get("report")
            if self.bed.require and not is_multi_format_skip(report):
                raise GuestFailure(f"skipped in the guest: {report}")
            pytest.skip(f"in the guest ({image_label(self.image)}): {report}")
        raise GuestFailure(result.get("report") or "no report")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, GuestFailure):
            return f"[ran in the user_events qemu guest on {self.image}]\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name} [user_events guest]"


class KernelTestBed:
    """Decides where kernel tests run, runs each guest once, and counts what ran where."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.require: bool = config.getoption("require_kernel")
        self.images: list[str] = config.getoption("kernel_image")
        self.in_guest = os.environ.get(GUEST_ENV) == "1"
        self.results_path = (
            os.path.join(os.environ["TESTBED_SHARE"], RESULTS_FILE) if self.in_guest else None
        )
        self.mode = "none"
        self.selected: list[GuestItem] = []
        """The stand-ins left after deselection (-k, -m)."""
        self.guest_results: dict[str, dict[str, dict[str, Any]]] = {}
        self.guest_runs: dict[str, threading.Thread] = {}
        """Each image's guest, started once the tests are collected."""
        self.guest_processes: list[subprocess.Popen[str]] = []
        """Their qemu processes, killed if the host's run ends first (``-x``, Ctrl-C)."""
        self.guest_jobs: int = config.getoption("guest_jobs") or max(len(self.images), 1)
        self.guest_slots = threading.Semaphore(self.guest_jobs)
        self.guest_failure: dict[str, str] = {}
        self.unavailable_reason = ""
        self.ran: dict[str, int] = {}
        """Kernel tests whose body ran, per place ("" natively or unavailable, else image)."""
        self.not_ran: dict[str, int] = {}
        self.bad_skips: list[str] = []

    @pytest.hookimpl(tryfirst=True)  # before -k and -m deselect: they see the stand-ins
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
        reasons = [guest.unavailable_reason(image) for image in self.images or [None]]
        if all(reason is None for reason in reasons):
            self.mode = "guest"
            self._stand_in(items, set(kernel_items))
            return
        self.mode = "unavailable"
        guest_reason = "; ".join(r for r in reasons if r)
        self.unavailable_reason = (
            f"no user_events kernel: natively, {native}; in a guest, {guest_reason}"
        )

    def _stand_in(self, items: list[pytest.Item], kernel_items: set[pytest.Item]) -> None:
        """Replace each kernel test by one stand-in per image, in place, after every host test."""
        replaced: list[pytest.Item] = []
        for item in items:
            if item not in kernel_items:
                replaced.append(item)
                continue
            for image in self.images:
                label = image_label(image)
                stand_in = GuestItem.from_parent(
                    item.parent,
                    name=f"{item.name}@{label}",
                    bed=self,
                    image=image,
                    guest_nodeid=item.nodeid,
                )
                stand_in.own_markers = list(item.own_markers)
                stand_in.keywords.update(item.keywords)
                stand_in.keywords[label] = True
                replaced.append(stand_in)
        # the stand-ins last: the host's own tests run while the guests do
        items[:] = [i for i in replaced if not isinstance(i, GuestItem)] + [
            i for i in replaced if isinstance(i, GuestItem)
        ]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected = [item for item in session.items if isinstance(item, GuestItem)]
        if session.config.option.collectonly:
            return
        nodeids = {image: self._guest_nodeids(image) for image in self.images}
        images = [image for image, ids in nodeids.items() if ids]
        if images:
            count = sum(len(ids) for ids in nodeids.values())
            self._say(
                f"user_events: {count} kernel tests in qemu guests, on "
                + ", ".join(images)
                + f" ({self.guest_jobs} at once), while the host runs its own tests"
            )
        for image in images:  # each waits for a slot; the host's tests go on meanwhile
            run = threading.Thread(target=self._run_guest_in_slot, args=(image,), daemon=True)
            run.name = f"guest {image_label(image)}"
            self.guest_runs[image] = run
            run.start()

    def _run_guest_in_slot(self, image: str) -> None:
        with self.guest_slots:
            try:
                self._run_guest(image)
            except Exception as error:  # reported by each of the image's tests
                self.guest_results.setdefault(image, {})
                self.guest_failure[image] = f"the guest on {image} did not run: {error!r}"

    def _guest_nodeids(self, image: str) -> list[str]:
        nodeids = (item.guest_nodeid for item in self.selected if item.image == image)
        return list(dict.fromkeys(nodeids))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if not item.get_closest_marker("kernel") or isinstance(item, GuestItem):
            return
        if self.mode == "unavailable":
            if self.require:
                pytest.fail(f"--require-kernel: {self.unavailable_reason}", pytrace=False)
            pytest.skip(self.unavailable_reason)
        if item.get_closest_marker("multi_format") and (self.in_guest or self.mode == "native"):
            if not kernel_has_multi_format():
                pytest.skip(MULTI_FORMAT_REASON)

    def guest_result(self, image: str, nodeid: str) -> dict[str, Any]:
        self.guest_runs[image].join()  # started once the tests were collected
        results = self.guest_results[image]
        if nodeid in results:
            return results[nodeid]
        failure = self.guest_failure.get(image) or "no result from the guest"
        return {"outcome": "failed", "report": failure}

    def _run_guest(self, image: str) -> None:
        rootdir = str(self.config.rootpath)
        argv = [sys.executable, "-m", "pytest", "-p", "testbed.pytest_plugin"]
        argv += ["-p", "no:cacheprovider", "-q", "-rs", "--color=no"]
        nodeids = self._guest_nodeids(image)
        argv += ["--rootdir", rootdir]
        if self.config.inipath:
            argv += ["-c", str(self.config.inipath)]
        argv += nodeids
        collected: dict[str, dict[str, Any]] = {}

        def read_results(share: Path) -> None:
            path = share / RESULTS_FILE
            if path.exists():
                for line in path.read_text().splitlines():
                    record = json.loads(line)
                    collected[record["nodeid"]] = record

        run = guest.run(
            image,
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
            on_start=self.guest_processes.append,
        )
        self.guest_results[image] = collected
        missing = [n for n in nodeids if n not in collected]
        if missing or run.returncode not in (0, 1):
            self.guest_failure[image] = (
                f"the guest pytest on {image} ended with {run.returncode} before this test "
                f"reported; last console output:\n{run.console[-6000:]}"
            )

    def _say(self, line: str) -> None:
        """A line on the terminal now, in the middle of a test (whose output is captured)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    # --- in the guest (or natively): record each test's result; on the host: count ------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if item.get_closest_marker("kernel") is None:
            return
        place = image_label(item.image) if isinstance(item, GuestItem) else ""
        self.ran.setdefault(place, 0)
        self.not_ran.setdefault(place, 0)
        if isinstance(item, GuestItem):
            if report.skipped and isinstance(report.longrepr, tuple):  # name the test's file
                report.longrepr = (str(item.path), None, report.longrepr[2])
            # the guest says whether the test body ran there
            if report.when == "call":
                if item.result().get("ran"):
                    self.ran[place] += 1
                else:
                    self.not_ran[place] += 1
                if item.result().get("outcome") == "skipped" and not is_multi_format_skip(
                    item.result().get("report")
                ):
                    self.bad_skips.append(item.nodeid)
            return
        # Only an executed test body counts as ran: a setup error or skip does not.
        if report.when == "call" and not report.skipped:
            self.ran[place] += 1
            item._testbed_ran = True  # type: ignore[attr-defined]
        elif report.skipped and report.when in ("setup", "call"):
            self.not_ran[place] += 1
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else None
            if reason is not None:
                reason = reason.removeprefix("Skipped: ")
            if is_multi_format_skip(reason):  # raised here: name the test's file instead
                report.longrepr = (str(item.path), None, reason)
            else:
                self.bad_skips.append(item.nodeid)
                if self.require and self.mode == "native":  # only the declared skip
                    report.outcome = "failed"
                    report.longrepr = f"--require-kernel: skipped: {reason or report.longrepr}"
        if self.results_path:
            self._record(self.results_path, item, report)

    @staticmethod
    def _record(path: str, item: pytest.Item, report: pytest.TestReport) -> None:
        state = getattr(item, "_testbed_record", {"nodeid": item.nodeid, "outcome": "passed"})
        state["ran"] = bool(getattr(item, "_testbed_ran", False))
        state["seconds"] = state.get("seconds", 0.0) + report.duration
        if report.failed:
            state["outcome"] = "failed"
            text = report.longreprtext
            for title, content in report.sections:
                text += f"\n----- {title} -----\n{content}"
            state["report"] = (state.get("report", "") + f"\n[{report.when}] " + text).strip()
        elif report.skipped and state["outcome"] == "passed":
            state["outcome"] = "skipped"
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            state["report"] = reason.removeprefix("Skipped: ")
        item._testbed_record = state  # type: ignore[attr-defined]
        if report.when == "teardown":
            with open(path, "a", encoding="utf-8") as file:
                file.write(json.dumps(state) + "\n")

    def _places(self) -> list[str]:
        if self.mode == "guest":
            # images whose tests -k or -m deselected entirely do not count
            chosen = {item.image for item in self.selected}
            return [image_label(image) for image in self.images if image in chosen] or [""]
        return [""]

    def _empty_places(self) -> list[str]:
        return [place for place in self._places() if self.ran.get(place, 0) == 0]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.in_guest or (self.mode == "none" and not self.require):
            return
        for place in self._places():
            ran, skipped = self.ran.get(place, 0), self.not_ran.get(place, 0)
            if self.mode == "guest":
                where = f"in the qemu guest on {place}" if place else "in the qemu guest"
            else:
                where = "natively" if self.mode == "native" else "nowhere"
            line = f"user_events kernel tests: {ran} ran {where}, {skipped} skipped"
            if self.mode == "unavailable":
                line += f" ({self.unavailable_reason})"
            terminalreporter.write_line(line)
        for image, results in self.guest_results.items():
            slowest = sorted(results.values(), key=lambda r: -r.get("seconds", 0.0))[:SLOWEST]
            total = sum(r.get("seconds", 0.0) for r in results.values())
            terminalreporter.write_line(
                f"user_events: the slowest kernel tests on {image_label(image)} "
                f"(of {total:.0f} s in all): "
                + ", ".join(f"{r['nodeid']} {r.get('seconds', 0.0):.0f} s" for r in slowest)
            )
        if self.require:
            for place in self._empty_places():
                terminalreporter.write_line(
                    "user_events: --require-kernel is set and no kernel test ran"
                    + (f" on {place}" if place else ""),
                    red=True,
                )
            if self.bad_skips:
                terminalreporter.write_line(
                    f"user_events: --require-kernel is set and {len(self.bad_skips)} kernel "
                    "tests were skipped for another reason than MULTI_FORMAT",
                    red=True,
                )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        for process in self.guest_processes:  # no guest outlives a run that ended early
            if process.poll() is None:
                process.kill()

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.require and not self.in_guest and (self._empty_places() or self.bad_skips):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
