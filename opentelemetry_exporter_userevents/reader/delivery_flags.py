# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record``'s delivery flags, named after the Collector's exporter settings
(``sending_queue``, ``retry_on_failure``), with their defaults: the CLI imports no stage,
so the defaults are written here and ``tests/reader/commands/test_delivery_flags.py``
checks they agree with the stages' (``output_stage``, ``delivery``)."""

from __future__ import annotations

import argparse

from opentelemetry_exporter_userevents.reader import options

SENDING_QUEUE_SIZE = 1000
"""``--sending-queue-size``'s default: ``output_stage.MAX_QUEUED_BATCHES``, the Collector's
``sending_queue`` ``queue_size``."""
SENDING_QUEUE_MB = 64
"""``--sending-queue-max-mb``'s default: ``output_stage.MAX_QUEUED_BYTES`` in MiB."""
BATCH_ITEMS = 512
"""``output_stage.MAX_BATCH_ITEMS``."""
RETRY_AFTER_CAP = 300.0
"""``delivery.MAX_RETRY_AFTER``."""
RETRY_ON_FAILURE = {
    "initial_interval": 5.0,
    "max_interval": 30.0,
    "multiplier": 1.5,
    "max_elapsed_time": 300.0,
}
"""The Collector's ``retry_on_failure`` defaults: ``delivery.RetryOnFailure``'s."""


def add_delivery_flags(parser: argparse.ArgumentParser) -> None:
    """``--sending-queue-*`` and ``--retry-on-failure-*``."""
    parser.add_argument(
        "--sending-queue-size",
        type=options.positive,
        default=SENDING_QUEUE_SIZE,
        metavar="BATCHES",
        help="the Collector's sending_queue queue_size: batches (of at most "
        f"{BATCH_ITEMS} items) held in memory for the output while it sends or retries "
        "(default %(default)s); when full, the oldest are dropped for the new, counted",
    )
    parser.add_argument(
        "--sending-queue-max-mb",
        type=options.positive,
        default=SENDING_QUEUE_MB,
        metavar="MB",
        help="the sending queue's bound in estimated MiB of the items it holds (default "
        "%(default)s); when reached, the oldest batches are dropped, counted",
    )
    parser.add_argument(
        "--retry-on-failure-enabled",
        type=options.boolean,
        default=True,
        metavar="true|false",
        help="the Collector's retry_on_failure.enabled: with --exporter otlp_proto_http or "
        "otlp_proto_grpc, a request the collector did not take (no answer, 429/502/503/504, "
        "a retryable gRPC code, an attempt past OTEL_EXPORTER_OTLP_TIMEOUT) is tried again "
        "with the backoff below, a Retry-After or RetryInfo delay honoured (at most "
        f"{RETRY_AFTER_CAP:.0f} s) (default: true; false: one attempt)",
    )
    for flag, default, what in (
        ("initial-interval", RETRY_ON_FAILURE["initial_interval"], "the first backoff"),
        ("max-interval", RETRY_ON_FAILURE["max_interval"], "the longest backoff"),
        (
            "max-elapsed-time",
            RETRY_ON_FAILURE["max_elapsed_time"],
            "how long a request is retried from its first attempt, then spooled (--spool) or "
            "counted as not written; 0: for ever",
        ),
    ):
        parser.add_argument(
            f"--retry-on-failure-{flag}",
            type=options.seconds,
            default=default,
            metavar="SECONDS",
            help=f"retry_on_failure.{flag.replace('-', '_')}: {what} (default %(default)g)",
        )
    parser.add_argument(
        "--retry-on-failure-multiplier",
        type=options.multiplier,
        default=RETRY_ON_FAILURE["multiplier"],
        metavar="X",
        help="retry_on_failure.multiplier: each backoff this many times the one before, "
        "each randomized by +-50%% (default %(default)g)",
    )
