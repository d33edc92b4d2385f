# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The command line's option values, checked as argparse parses them, before anything
starts: a bad value is a usage error (exit 2) that names the option, in the words its
``--help`` uses (:data:`AT_LEAST_ONE` and the others are in both). The modules a check
needs are imported when it runs, so that ``--help`` loads none of them."""

from __future__ import annotations

import argparse
import math

AT_LEAST_ONE = "a whole number, at least 1"
ZERO_OR_MORE = "seconds, 0 or more"
MORE_THAN_ZERO = "seconds, more than 0"
MILLISECONDS = "milliseconds, 0 or more"

EXPORTER_PACKAGES = {
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc (this package's grpc extra)",
    "otlp": "opentelemetry-exporter-otlp",
    "zipkin_json": "opentelemetry-exporter-zipkin-json",
    "zipkin_proto": "opentelemetry-exporter-zipkin-proto-http",
    "prometheus": "opentelemetry-exporter-prometheus",
}
"""The packages that provide the exporters people name most, for the error that says which
one to install when it is missing."""


def _number(text: str, kind: type[float] | type[int], rule: str) -> float:
    """``text`` as ``kind``, or a usage error in the words ``--help`` uses (argparse would
    name the function that parses it, ``invalid _duration value``)."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {rule}") from None


def positive(text: str) -> int:
    number = int(_number(text, int, AT_LEAST_ONE))
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: {AT_LEAST_ONE}")
    return number


def seconds(text: str) -> float:
    number = _number(text, float, ZERO_OR_MORE)
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: {ZERO_OR_MORE}")
    return number


def duration(text: str) -> float:
    number = _number(text, float, MORE_THAN_ZERO)
    if not number > 0 or math.isinf(number):
        raise argparse.ArgumentTypeError(f"{text!r}: {MORE_THAN_ZERO}")
    return number


def milliseconds(text: str) -> float:
    number = _number(text, float, MILLISECONDS)
    if not number >= 0 or math.isinf(number):
        raise argparse.ArgumentTypeError(f"{text!r}: {MILLISECONDS}")
    return number


def boolean(text: str) -> bool:
    """``true`` or ``false``, as the Collector's settings are written."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r}: true or false")
    return value == "true"


def multiplier(text: str) -> float:
    """A backoff's multiplier: 1 or more."""
    number = _number(text, float, "a number, 1 or more")
    if not 1 <= number < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a number, 1 or more")
    return number


def kernel_groups(text: str) -> str:
    """``--kernel``'s groups, checked now (the modules that read them load later)."""
    from opentelemetry_exporter_userevents.reader.views.kernel_groups import (  # noqa: PLC0415
        parse_groups,
    )

    try:
        parse_groups(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def prefix(text: str) -> str:
    from opentelemetry_exporter_userevents.record.tracepoints import (  # noqa: PLC0415
        ANY_PREFIX,
        MAX_PREFIX_LENGTH,
        is_prefix,
    )

    if text == ANY_PREFIX or is_prefix(text):
        return text
    rule = f"letters, digits and '_', not a digit first, at most {MAX_PREFIX_LENGTH} characters"
    raise argparse.ArgumentTypeError(f"{text!r}: a prefix is {rule} (or '*')")


def provider(text: str) -> str:
    from opentelemetry_exporter_userevents.reader.commands.common import (  # noqa: PLC0415
        provider_argument,
    )

    return provider_argument(text)


def exporters() -> list[str]:
    """The installed OpenTelemetry exporters' entry-point names, except ours (the reader
    would read its own output)."""
    from importlib.metadata import entry_points  # noqa: PLC0415

    names: set[str] = set()
    for kind in ("traces", "logs", "metrics"):
        names |= {e.name for e in entry_points(group=f"opentelemetry_{kind}_exporter")}
    return sorted(names - {"user_events"})


def exporter(text: str) -> str:
    """``--exporter``'s check: an installed exporter's name, else an error listing those
    installed and, for an exporter we know, the package to install."""
    installed = exporters()
    if text in installed:
        return text
    listed = ", ".join(installed) or "none"
    if text == "user_events":
        why = "re-exporting to user_events would feed the reader its own output"
    elif text in EXPORTER_PACKAGES:
        why = f"{text} is not installed: pip install {EXPORTER_PACKAGES[text]}"
    else:
        why = f"no exporter named {text!r}"
    raise argparse.ArgumentTypeError(f"{why} (installed: {listed})")


INSTALLED = "<installed exporters>"
"""In ``--exporter``'s help, replaced by the installed ones' names when help is shown:
listing them loads ``importlib.metadata`` (a fifth of ``--help``'s CPU), which a command
without ``--exporter`` does not need."""


class Help(argparse.HelpFormatter):
    """The subcommands' help, with :data:`INSTALLED` filled in."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text is not None and INSTALLED in text:
            text = text.replace(INSTALLED, ", ".join(exporters()) or "none")
        return text
