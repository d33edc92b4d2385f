# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""``record``'s delivery flags are named after the Collector's settings (``sending_queue``,
``retry_on_failure``), default to the Collector's values, show them in ``--help``, and agree
with the constants the output stage and the retry sender use (the CLI imports no stage)."""

from __future__ import annotations

import pytest

from opentelemetry_exporter_userevents.reader import cli, delivery_flags
from opentelemetry_exporter_userevents.reader.commands.common import retry_on_failure_of
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper import delivery, output_stage
from opentelemetry_exporter_userevents.reader.outputs.exporterhelper.delivery import RetryOnFailure


def test_the_defaults_are_the_collectors_and_agree_with_the_stage() -> None:
    args = cli.parser().parse_args(["record", "--exporter", "otlp_proto_http"])
    assert retry_on_failure_of(args) == RetryOnFailure()
    assert RetryOnFailure()[:5] == (True, 5.0, 30.0, 1.5, 300.0)  # exporterhelper's
    assert (
        args.sending_queue_size
        == delivery_flags.SENDING_QUEUE_SIZE
        == output_stage.MAX_QUEUED_BATCHES
    )
    assert args.sending_queue_max_mb * 1024 * 1024 == output_stage.MAX_QUEUED_BYTES
    assert delivery_flags.BATCH_ITEMS == output_stage.MAX_BATCH_ITEMS
    assert delivery_flags.RETRY_AFTER_CAP == delivery.MAX_RETRY_AFTER


def test_the_flags_set_retry_on_failure() -> None:
    args = cli.parser().parse_args(
        [
            "record",
            "--exporter",
            "otlp_proto_http",
            "--retry-on-failure-enabled",
            "false",
            "--retry-on-failure-initial-interval",
            "1",
            "--retry-on-failure-max-interval",
            "2",
            "--retry-on-failure-multiplier",
            "3",
            "--retry-on-failure-max-elapsed-time",
            "0",
            "--sending-queue-size",
            "7",
            "--sending-queue-max-mb",
            "9",
        ]
    )
    assert retry_on_failure_of(args) == RetryOnFailure(False, 1.0, 2.0, 3.0, 0.0)
    assert (args.sending_queue_size, args.sending_queue_max_mb) == (7, 9)


@pytest.mark.parametrize(
    "argv",
    [
        ["--retry-on-failure-enabled", "maybe"],
        ["--retry-on-failure-multiplier", "0.5"],
        ["--retry-on-failure-max-elapsed-time", "-1"],
        ["--sending-queue-size", "0"],
    ],
)
def test_nonsense_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["record", *argv])


def test_help_shows_each_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["record", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in (
        ("--sending-queue-size", "(default 1000)"),
        ("--sending-queue-max-mb", "(default 64)"),
        ("--retry-on-failure-initial-interval", "(default 5)"),
        ("--retry-on-failure-max-interval", "(default 30)"),
        ("--retry-on-failure-max-elapsed-time", "(default 300)"),
        ("--retry-on-failure-multiplier", "(default 1.5)"),
    ):
        after = text.split(f"{flag} ", 2)[-1]
        assert default in after.split(" --", 1)[0], flag
