# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Our tracepoint names: ``<prefix>_span``, ``<prefix>_log_<class>``,
``<prefix>_metric_<kind>`` and ``<prefix>_resource``, each with its schema, in two layouts
(docs/schema.md):

- multi-format (Linux 6.9+): ``user_events_multi/<base>.<hex id>``, the kernel giving each
  distinct format of one name its own id;
- single-format (any kernel): ``user_events/<base>_<schema version>``, the version (8 hex
  digits, :attr:`Schema.version`) naming the field list, so two schema versions never
  fight over one name. Releases before versioned names used ``user_events/<base>``.

:func:`parse_tracepoint` reads any of them back.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from opentelemetry_exporter_userevents.abi.format import EventFormat, split_multi_format_name
from opentelemetry_exporter_userevents.record import eventheader, otlp_metrics
from opentelemetry_exporter_userevents.record.schema import (
    ANNOUNCE,
    LOG,
    METRIC_HISTOGRAM,
    METRIC_NUMBER,
    RESOURCE,
    SPAN,
    Schema,
)

DEFAULT_PREFIX = "otel"
"""The exporters' prefix unless configured."""
ANY_PREFIX = "*"
"""A reader's prefix that stands for every prefix whose tracepoints match our schemas."""
SPAN_KIND = "span"
LOG_KIND = "log"
RESOURCE_KIND = "resource"
METRIC_SUM_KIND = "metric_sum"
METRIC_GAUGE_KIND = "metric_gauge"
METRIC_HISTOGRAM_KIND = "metric_histogram"
METRIC_EXP_HISTOGRAM_KIND = "metric_exp_histogram"
METRIC_KINDS: dict[str, Schema] = {
    METRIC_SUM_KIND: METRIC_NUMBER,
    METRIC_GAUGE_KIND: METRIC_NUMBER,
    METRIC_HISTOGRAM_KIND: METRIC_HISTOGRAM,
    METRIC_EXP_HISTOGRAM_KIND: METRIC_HISTOGRAM,
}
"""Metric record kinds (one data point per record) and their schemas; each kind's
tracepoint is ``<prefix>_<kind>``."""

SEVERITY_CLASSES = ("trace", "debug", "info", "warn", "error", "fatal")
"""Log tracepoints, one per class of four severity numbers (1-4 trace, ..., 21-24 fatal)."""


def severity_class(severity_number: int) -> str:
    """The class of a severity number; unset (0) and out-of-range numbers count as info."""
    if 1 <= severity_number <= 24:
        return SEVERITY_CLASSES[(severity_number - 1) // 4]
    return "info"


def span_tracepoint(prefix: str) -> str:
    return f"{prefix}_span"


def log_tracepoint(prefix: str, severity: str) -> str:
    return f"{prefix}_log_{severity}"


def resource_tracepoint(prefix: str) -> str:
    return f"{prefix}_resource"


def metric_tracepoint(prefix: str, kind: str) -> str:
    """``<prefix>_metric_sum``, ``<prefix>_metric_gauge``, ``<prefix>_metric_histogram``
    or ``<prefix>_metric_exp_histogram`` for a kind of METRIC_KINDS."""
    return f"{prefix}_{kind}"


def tracepoint_kinds(prefix: str) -> dict[str, tuple[str, Schema]]:
    """Base names of a prefix's tracepoints (no ``.<id>``), with their kind and schema."""
    kinds = {
        span_tracepoint(prefix): (SPAN_KIND, SPAN),
        resource_tracepoint(prefix): (RESOURCE_KIND, RESOURCE),
    }
    for severity in SEVERITY_CLASSES:
        kinds[log_tracepoint(prefix, severity)] = (LOG_KIND, LOG)
    for kind, schema in METRIC_KINDS.items():
        kinds[metric_tracepoint(prefix, kind)] = (kind, schema)
    return kinds


def base_name(tracepoint: str) -> str:
    """``otel_span.1f`` and ``otel_span_1a2b3c4d`` -> ``otel_span``; other names stay as
    they are."""
    parsed = parse_tracepoint(tracepoint)
    return parsed.base if parsed is not None else split_multi_format_name(tracepoint)[0]


def single_format_name(base: str, schema: Schema) -> str:
    """The single-format name of ``schema``'s version of tracepoint ``base``."""
    return f"{base}_{schema.version}"


def commands(base: str, schema: Schema) -> tuple[str, str]:
    """The registration commands of tracepoint ``base``: (multi-format, single-format). An
    EventHeader tracepoint, and ``otlp_metrics``, have one, unversioned: their readers find
    them by their names."""
    if schema is eventheader.TRACEPOINT or schema is otlp_metrics.TRACEPOINT:
        return schema.command(base), schema.command(base)
    return schema.command(base), schema.command(single_format_name(base, schema))


@dataclass(frozen=True)
class TracepointName:
    """What one of our tracepoint names says."""

    prefix: str
    kind: str
    """``span``, ``log``, ``resource`` or a metric kind (METRIC_KINDS)."""
    schema: Schema
    """The schema of this kind (the format file says which version it is)."""
    base: str
    """``<prefix>_span``, ``<prefix>_log_<class>`` or ``<prefix>_resource``."""
    version: str | None
    """The schema version in a single-format name; None in other names."""


_VERSIONED = re.compile(r"^(?P<base>.+)_(?P<version>[0-9a-f]{8})$")
_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SUFFIXES = (
    [("_span", SPAN_KIND, SPAN), ("_resource", RESOURCE_KIND, RESOURCE)]
    + [(f"_log_{severity}", LOG_KIND, LOG) for severity in SEVERITY_CLASSES]
    + [(f"_{kind}", kind, schema) for kind, schema in METRIC_KINDS.items()]
)


def parse_tracepoint(tracepoint: str) -> TracepointName | None:
    """The prefix, kind and version of one of our tracepoint names (``otel_span.1f``,
    ``otel_span_1a2b3c4d``, ``otel_span``); None for any other name. A name is not proof:
    a reader checks the tracepoint's format against the schema too."""
    base, _ = split_multi_format_name(tracepoint)
    candidates: list[tuple[str, str | None]] = [(base, None)]
    versioned = _VERSIONED.match(base)
    if versioned is not None:
        candidates.insert(0, (versioned["base"], versioned["version"]))
    for name, version in candidates:
        for suffix, kind, schema in _SUFFIXES:
            prefix = name[: -len(suffix)]
            if name.endswith(suffix) and _PREFIX.match(prefix):
                return TracepointName(prefix, kind, schema, name, version)
    return None


def announce_commands() -> tuple[str, str]:
    """The announcement tracepoint's registration commands (multi-format, single-format):
    one name for every prefix, ``otel_userevents_announce`` (docs/schema.md)."""
    return commands(ANNOUNCE.name, ANNOUNCE)


def is_announce(tracepoint: str) -> bool:
    """True for the announcement tracepoint in either layout (``otel_userevents_announce.1``,
    ``otel_userevents_announce_<version>``); its format still has to match."""
    base, _ = split_multi_format_name(tracepoint)
    versioned = _VERSIONED.match(base)
    return base == ANNOUNCE.name or (versioned is not None and versioned["base"] == ANNOUNCE.name)


def is_prefix(text: str) -> bool:
    """A prefix our tracepoint names can have (letters, digits, ``_``; not a digit first)."""
    return len(text) <= MAX_PREFIX_LENGTH and _PREFIX.match(text) is not None


MAX_PREFIX_LENGTH = 200
"""Longer than any tracepoint name the kernel takes (its limit is 256 with the suffixes)."""


def field_list_of(fmt: EventFormat) -> str:
    """The field list a ``format`` file shows, spelled as a registration command spells it
    (``char trace_id[32]`` -> ``char[32] trace_id``), so it can be compared with
    :attr:`Schema.field_list`."""
    spelled = []
    for field in fmt.fields:
        kind = field.type
        if field.is_array:
            loc = kind.startswith(("__rel_loc ", "__data_loc "))
            kind = f"{kind}[]" if loc else f"{kind}[{field.size}]"
        spelled.append(f"{kind} {field.name}")
    return "; ".join(spelled)


def format_version(fmt: EventFormat) -> str:
    """The schema version of the fields a ``format`` file shows (see Schema.version)."""
    return hashlib.blake2b(field_list_of(fmt).encode(), digest_size=4).hexdigest()
