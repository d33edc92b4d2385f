# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Exporter settings from keyword arguments, then environment variables, then defaults."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any

from opentelemetry_exporter_userevents import environment_variables as env
from opentelemetry_exporter_userevents.abi.ring_buffer import FTRACE_MAX_PAYLOAD, PERF_MAX_PAYLOAD
from opentelemetry_exporter_userevents.record.eventheader import PROVIDER_NAME_MAX, is_provider_name

_logger = logging.getLogger(__name__)

_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
DEFAULT_FORMAT = "default"
"""Our own records (docs/schema.md): what stock tools, kernel filters and hist triggers read."""
EVENTHEADER = "eventheader"
"""Common Schema 4.0 in EventHeader events, as opentelemetry-rust-contrib writes them
(docs/common-schema.md): what Geneva agents, otel-arrow and perf-decode read."""
FORMATS = (DEFAULT_FORMAT, EVENTHEADER)
KEYWORD_MAX = (1 << 64) - 1


@dataclass(frozen=True)
class ExporterConfig:
    prefix: str = "otel"
    max_record_size: int = FTRACE_MAX_PAYLOAD
    resource_interval_millis: int = 10_000
    tracefs: str | None = None
    user_events_data: str | None = None
    """The ``user_events_data`` file itself, when only it is bind-mounted (a container)."""
    multi_format: bool = True
    """Register multi-format events where the kernel has them (6.9+); False: the
    single-format layout on every kernel (what perf, trace-cmd and the otel-arrow
    receiver read). EventHeader tracepoints are always single-format."""
    format: str = DEFAULT_FORMAT
    """DEFAULT_FORMAT or EVENTHEADER (spans and logs; the prefix is the provider name)."""
    eventheader_keyword: int = 1
    """The keyword of the EventHeader tracepoints (``<provider>_L<level>K<keyword>``)."""
    refused: str | None = None
    """Why these settings cannot be used (a prefix the format does not allow), or None: the
    exporter then registers nothing and exports nothing, rather than write the service's
    records under the default prefix, where another service's are."""

    @classmethod
    def from_arguments(
        cls,
        *,
        prefix: str | None = None,
        max_record_size: int | None = None,
        resource_interval_millis: int | None = None,
        tracefs: str | None = None,
        user_events_data: str | None = None,
        multi_format: bool | str | None = None,
        format: str | None = None,  # noqa: A002 - the configuration file's key
        eventheader_keyword: int | str | None = None,
        **unknown: Any,
    ) -> ExporterConfig:
        """Settings for an exporter; declarative configuration passes its YAML keys here."""
        if unknown:
            _logger.warning("user_events exporter: ignoring unknown options %s", sorted(unknown))
        chosen = _format(format)
        prefix = prefix or os.environ.get(env.OTEL_EXPORTER_USER_EVENTS_PREFIX) or cls.prefix
        refused = None
        if chosen == EVENTHEADER and not is_provider_name(prefix):
            refused = (
                f"prefix {prefix!r} is not an EventHeader provider name (ASCII letters, "
                f"digits and '_', at most {PROVIDER_NAME_MAX})"
            )
        elif chosen != EVENTHEADER and not _PREFIX.match(prefix):
            refused = f"prefix {prefix!r} is not a C identifier of at most 32 characters"
        if refused is not None:  # the same refusal in both formats
            _logger.warning(
                "user_events exporter disabled, it will export nothing: %s (set another "
                "prefix; the default %r would mix this service with another's)",
                refused,
                cls.prefix,
            )
            prefix = cls.prefix  # never registered: the name the writer is given
        size = _number(max_record_size, env.OTEL_EXPORTER_USER_EVENTS_MAX_RECORD_SIZE)
        if size is not None and not 1024 <= size <= PERF_MAX_PAYLOAD:
            _logger.warning(
                "user_events exporter: max_record_size %d outside 1024..%d; using %d",
                size,
                PERF_MAX_PAYLOAD,
                FTRACE_MAX_PAYLOAD,
            )
            size = None
        interval = _number(
            resource_interval_millis, env.OTEL_EXPORTER_USER_EVENTS_RESOURCE_INTERVAL
        )
        if interval is not None and interval < 1:
            interval = None
        return cls(
            prefix=prefix,
            max_record_size=size or cls.max_record_size,
            resource_interval_millis=interval or cls.resource_interval_millis,
            tracefs=tracefs or os.environ.get(env.OTEL_EXPORTER_USER_EVENTS_TRACEFS) or None,
            user_events_data=(
                user_events_data or os.environ.get(env.OTEL_EXPORTER_USER_EVENTS_DATA) or None
            ),
            multi_format=_boolean(multi_format, env.OTEL_EXPORTER_USER_EVENTS_MULTI_FORMAT, True),
            format=chosen,
            eventheader_keyword=_keyword(eventheader_keyword),
            refused=refused,
        )


def _number(argument: int | None, variable: str) -> int | None:
    if argument is not None:
        return int(argument)
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        _logger.warning(
            "user_events exporter: %s=%r is not a whole number; ignored", variable, text
        )
        return None


def _boolean(argument: bool | str | None, variable: str, default: bool) -> bool:
    """A setting given as True/False (keyword, configuration file) or as the text
    ``true``/``false`` (environment, case-insensitive, as the SDK reads booleans)."""
    text = argument if argument is not None else os.environ.get(variable)
    if text is None or isinstance(text, bool):
        return default if text is None else text
    value = str(text).strip().lower()
    if value in ("true", "false"):
        return value == "true"
    if value:
        _logger.warning(
            "user_events exporter: %s=%r is neither true nor false; using %s",
            variable,
            text,
            str(default).lower(),
        )
    return default


def _format(argument: str | None) -> str:
    """The format asked for (keyword, then environment), case-insensitive; an unknown one
    is said and the default used."""
    variable = env.OTEL_EXPORTER_USER_EVENTS_FORMAT
    text = argument if argument is not None else os.environ.get(variable)
    value = str(text or "").strip().lower()
    if not value:
        return DEFAULT_FORMAT
    if value not in FORMATS:
        _logger.warning(
            "user_events exporter: format %r is none of %s; using %r",
            text,
            ", ".join(FORMATS),
            DEFAULT_FORMAT,
        )
        return DEFAULT_FORMAT
    return value


def _keyword(argument: int | str | None) -> int:
    """The EventHeader keyword: a whole number 0..2**64-1, decimal or ``0x`` hex."""
    variable = env.OTEL_EXPORTER_USER_EVENTS_EVENTHEADER_KEYWORD
    text = argument if argument is not None else os.environ.get(variable, "").strip()
    if text == "":
        return ExporterConfig.eventheader_keyword
    try:
        value = text if isinstance(text, int) and not isinstance(text, bool) else int(str(text), 0)
    except ValueError:
        value = -1
    if not 0 <= value <= KEYWORD_MAX:
        _logger.warning(
            "user_events exporter: EventHeader keyword %r is not a whole number 0..2**64-1; "
            "using %d",
            text,
            ExporterConfig.eventheader_keyword,
        )
        return ExporterConfig.eventheader_keyword
    return value
