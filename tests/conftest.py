# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

import errno
import hashlib
import os
import re
from collections.abc import Iterator

import pytest

from opentelemetry_exporter_userevents.abi import Registration, UserEventsData
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs

pytest_plugins = ["testbed.pytest_plugin"]


@pytest.fixture(scope="session")
def kernel_has_multi_format(pytestconfig: pytest.Config) -> bool:
    """Whether this kernel accepts USER_EVENT_REG_MULTI_FORMAT (6.9+) or refuses it with
    EINVAL (6.4 to 6.8): tests that hold on both kernels assert the layout each gives."""
    plugin = pytestconfig.pluginmanager.get_plugin("testbed.pytest_plugin")
    return bool(plugin.kernel_has_multi_format())


@pytest.fixture
def tracefs() -> Tracefs:
    found = Tracefs.find()
    assert found is not None, "tracefs not found"
    return found


@pytest.fixture
def data(tracefs: Tracefs) -> Iterator[UserEventsData]:
    opened = UserEventsData(tracefs.path)
    assert opened.available, opened.reason
    yield opened
    opened.close()


@pytest.fixture
def event_name(request: pytest.FixtureRequest) -> str:
    """A name no other test uses: events outlive tests (deletion is asynchronous). A long
    name is cut, and then ends with a hash of the node id, so that parametrized variants of
    one long test never share it."""
    name = re.sub(r"\W", "_", request.node.name)
    if len(name) > 60:
        digest = hashlib.blake2b(request.node.nodeid.encode(), digest_size=4).hexdigest()
        name = f"{name[:51]}_{digest}"
    return "t_" + name


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    """A tracepoint prefix of this test's own (a C identifier), from its node id, so no
    two tests anywhere in the suite share tracepoints and records never mix."""
    return "p" + hashlib.blake2b(request.node.nodeid.encode(), digest_size=6).hexdigest()


class Listener:
    """An ftrace listener in a tracefs instance of the test's own.

    Reading the global buffer is unreliable across tests: trace event type ids are
    recycled, so records of a deleted event print under the name of a newer one.
    """

    def __init__(self, tracefs: Tracefs, instance: str) -> None:
        self.tracefs = tracefs
        self.instance = instance
        self.attached: list[tuple[str, str]] = []
        os.mkdir(os.path.join(tracefs.path, "instances", instance))

    def __call__(self, registration: Registration) -> None:
        """Attach to ``registration``'s tracepoint."""
        assert registration.tracepoint, "tracepoint not resolved"
        self.tracefs.set_enabled(registration.system, registration.tracepoint, True, self.instance)
        self.attached.append((registration.system, registration.tracepoint))

    def lines(self, registration: Registration) -> list[str]:
        """The instance's ``trace`` lines for ``registration``'s tracepoint."""
        path = os.path.join(self.tracefs.path, "instances", self.instance, "trace")
        with open(path, encoding="utf-8", errors="replace") as f:
            pattern = re.compile(rf"\s{re.escape(registration.tracepoint or '')}:")
            return [line.rstrip("\n") for line in f if pattern.search(line)]

    def recorded(self) -> int:
        """How many records the instance's buffer took in, exactly: those still there plus
        those overwritten since (the per-CPU ``stats`` files: entries + overrun)."""
        total = 0
        per_cpu = os.path.join(self.tracefs.path, "instances", self.instance, "per_cpu")
        for cpu in os.listdir(per_cpu):
            with open(os.path.join(per_cpu, cpu, "stats"), encoding="ascii") as f:
                stats = dict(line.split(":", 1) for line in f if ":" in line)
            total += int(stats["entries"]) + int(stats["overrun"])
        return total

    def close(self) -> None:
        for system, name in self.attached:
            try:
                self.tracefs.set_enabled(system, name, False, self.instance)
            except OSError as error:  # the event was deleted (ENOENT, or ENODEV mid-delete)
                if error.errno not in (errno.ENOENT, errno.ENODEV):
                    raise
        os.rmdir(os.path.join(self.tracefs.path, "instances", self.instance))


@pytest.fixture
def attach(tracefs: Tracefs, event_name: str) -> Iterator[Listener]:
    """Attach ftrace to registrations, in an instance that goes away after the test."""
    listener = Listener(tracefs, event_name[:40] + f"_{os.getpid()}")
    yield listener
    listener.close()
