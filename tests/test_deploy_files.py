# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""deploy/: what the schemas and systemd-analyze (in CI) cannot check.

The app mounts only the data file (hostPath of type File) where its setting says, with the
group the node grant gives; the grant is README.rst's; the reader runs the same command
line in the DaemonSet, the image and the systemd unit, and that command line parses.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from opentelemetry_exporter_userevents import environment_variables
from opentelemetry_exporter_userevents.reader import cli

yaml = pytest.importorskip("yaml")  # PyYAML: CI installs it with kubernetes-validate

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
DATA_FILE = "/sys/kernel/tracing/user_events_data"


def _documents(name: str) -> dict[str, Any]:
    with open(DEPLOY / "kubernetes" / name) as f:
        return {doc["kind"]: doc for doc in yaml.safe_load_all(f) if doc}


def _pod(name: str) -> dict[str, Any]:
    documents = _documents(name)
    workload = documents.get("DaemonSet") or documents["Deployment"]
    pod: dict[str, Any] = workload["spec"]["template"]["spec"]
    return pod


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", [])}


def _readme_grant() -> list[str]:
    """The commands of the group grant ("Access for an unprivileged service", moved from
    README.rst to docs/kernels.rst)."""
    text = (ROOT / "docs" / "kernels.rst").read_text()
    section = text.split("Access for an unprivileged service\n", 1)[1]
    block = section.split(".. code-block:: sh\n", 1)[1].lstrip("\n").split("\n\n", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def _unit(name: str) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for line in (DEPLOY / "systemd" / name).read_text().splitlines():
        if line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            keys.setdefault(key, []).append(value)
    return keys


def _access_gid() -> int:
    (grant,) = _pod("user-events-access.yaml")["initContainers"]
    return int(_env(grant)["USER_EVENTS_GID"])


def test_app_mounts_only_the_data_file_with_the_granted_group() -> None:
    pod = _pod("app-deployment.yaml")
    host_paths = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    assert list(host_paths.values()) == [{"path": DATA_FILE, "type": "File"}]
    (volume,) = host_paths
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert _access_gid() in pod["securityContext"]["supplementalGroups"]
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume]
    env = _env(container)
    assert env["OTEL_EXPORTER_USER_EVENTS_DATA"] == mount["mountPath"]
    # found in /proc/mounts even without the setting: a file mount point of that name
    assert os.path.basename(mount["mountPath"]) == "user_events_data"
    assert not mount["mountPath"].startswith("/sys/")
    for name in env:
        if name.startswith("OTEL_EXPORTER_USER_EVENTS_"):
            assert getattr(environment_variables, name, None) == name, name
    assert env["OTEL_PYTHON_CONFIGURATOR"] == "user_events"
    for signal in ("TRACES", "LOGS", "METRICS"):
        assert env[f"OTEL_{signal}_EXPORTER"] == "user_events"


def test_node_grant_is_the_readmes() -> None:
    readme = _readme_grant()
    assert readme == [
        "chgrp tracing /sys/kernel/tracing /sys/kernel/tracing/user_events_data",
        "chmod g+x /sys/kernel/tracing",
        "chmod g+rw /sys/kernel/tracing/user_events_data",
    ]
    # systemd: the same commands, binaries by path
    unit = _unit("user-events-access.service")
    assert [re.sub(r"^/bin/", "", c) for c in unit["ExecStart"]] == readme
    assert unit["Type"] == ["oneshot"]
    assert unit["WantedBy"] == ["multi-user.target"]
    # Kubernetes: the same, with the gid and tracefs where the pod mounts it
    pod = _pod("user-events-access.yaml")
    (grant,) = pod["initContainers"]
    (mount,) = grant["volumeMounts"]
    (volume,) = pod["volumes"]
    assert volume["hostPath"] == {"path": "/sys/kernel/tracing", "type": "Directory"}
    script = grant["command"][-1].replace('"$USER_EVENTS_GID"', "tracing")
    script = script.replace(mount["mountPath"], "/sys/kernel/tracing")
    assert [line for line in script.splitlines() if line.startswith("ch")] == readme
    assert grant["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}


def _reader_argv() -> dict[str, list[str]]:
    pod = _pod("reader-daemonset.yaml")
    (container,) = pod["containers"]
    containerfile = (DEPLOY / "container" / "Containerfile").read_text()
    entrypoint = re.search(r"^ENTRYPOINT (\[.*\])$", containerfile, re.M)
    cmd = re.search(r"^CMD (\[.*\])$", containerfile, re.M)
    assert entrypoint and cmd
    assert yaml.safe_load(entrypoint.group(1)) == ["otel-userevents"]
    (exec_start,) = _unit("otel-userevents.service")["ExecStart"]
    program, *unit_args = shlex.split(exec_start)
    assert program == "/usr/local/bin/otel-userevents"
    return {
        "daemonset": container["args"],
        "image": yaml.safe_load(cmd.group(1)),
        "systemd": unit_args,
    }


def test_reader_runs_the_same_command_everywhere() -> None:
    parsed = {}
    for where, argv in _reader_argv().items():
        options = vars(cli.parser().parse_args(argv))
        options.pop("tracefs")  # where the container mounts it; found in /proc/mounts anyway
        options.pop("func", None)
        parsed[where] = options
        assert options["command"] == "record", where
        assert options["prefixes"] == ["*"], where
        assert options["exporter"] == "otlp_proto_http", where
    assert parsed["daemonset"] == parsed["image"] == parsed["systemd"]


def test_reader_daemonset_privileges() -> None:
    documents = _documents("reader-daemonset.yaml")
    pod = _pod("reader-daemonset.yaml")
    assert pod["hostPID"] is True  # container.id from /proc/<host pid>/cgroup
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["privileged"] is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsUser"] == 0
    volumes = {v["name"]: v for v in pod["volumes"]}
    (tracefs,) = [m for m in container["volumeMounts"] if m["name"] == "tracefs"]
    assert volumes["tracefs"]["hostPath"] == {"path": "/sys/kernel/tracing", "type": "Directory"}
    assert not tracefs["mountPath"].startswith("/sys/")  # AppArmor denies writes below /sys
    assert f"--tracefs={tracefs['mountPath']}" in container["args"]
    (source,) = container["envFrom"]
    config_map = documents["ConfigMap"]
    assert source["configMapRef"]["name"] == config_map["metadata"]["name"]
    assert config_map["data"]["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http")


def test_systemd_reader_unit() -> None:
    unit = _unit("otel-userevents.service")
    assert unit["Restart"] == ["on-failure"]
    assert "user-events-access.service" in unit["After"][0].split()
    assert "user-events-access.service" in unit["Wants"][0].split()
    assert unit["EnvironmentFile"] == ["-/etc/default/otel-userevents"]
    # nothing that would hide tracefs, make /sys read-only or hide other processes' /proc
    for key in ("ProtectKernelTunables", "ProtectProc", "PrivateUsers", "PrivateNetwork"):
        assert key not in unit, key
