# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""A ``logging.Handler`` that reads the enable bit of the record's severity class first.

The SDK's ``LoggingHandler`` builds an OpenTelemetry ``LogRecord`` (attributes, timestamps,
body, context) for every ``logging`` call that reaches it, before any processor can see
that nobody listens. :class:`UserEventsLoggingHandler` overrides ``handle`` (so not even
the handler lock is taken) and returns at once while no tracer listens to the record's
severity class. Listened, it is the SDK's handler: the record is the one the SDK builds.
"""

from __future__ import annotations

import logging
import warnings

from opentelemetry._logs import LoggerProvider as APILoggerProvider
from opentelemetry.sdk._logs import LoggingHandler

from opentelemetry_exporter_userevents.abi.user_events import enable_word
from opentelemetry_exporter_userevents.log_exporter import UserEventsLogExporter

__all__ = ["UserEventsLoggingHandler"]


class UserEventsLoggingHandler(LoggingHandler):
    """The SDK's ``LoggingHandler``, skipped while the record's severity class is unheard.

    ``exporter`` gives the enable bits (severity classes); it must be the exporter of the
    provider's user_events processor (or one with the same prefix and settings).
    """

    def __init__(
        self,
        exporter: UserEventsLogExporter,
        level: int = logging.NOTSET,
        logger_provider: APILoggerProvider | None = None,
    ) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            super().__init__(level=level, logger_provider=logger_provider)
        self.exporter = exporter
        self._any_class = exporter.any_class_word
        self._enable = [enable_word(exporter.registration_for(n)) for n in range(25)]
        # The enable word by logging level number, filled on first use of each level.
        self._by_level: dict[int, memoryview] = {}

    def handle(self, record: logging.LogRecord) -> bool:
        if not self._any_class[0]:
            return False
        try:
            try:
                word = self._by_level[record.levelno]
            except KeyError:
                word = self._by_level.setdefault(
                    record.levelno, self._enable[severity_of_level(record.levelno)]
                )
            if not word[0]:
                return False
            return bool(super().handle(record))
        except Exception as exc:  # noqa: BLE001 - never into the application's logging call
            self.exporter._drop_invalid("a logging record", exc)
            return False


def severity_of_level(levelno: int) -> int:
    """The severity number the SDK's ``LoggingHandler`` gives a ``logging`` level (its
    ``std_to_otel``, which is private: tests/test_sdk_private_names.py fails if they differ):
    below 10 unset, 10..53 four numbers per ten levels (DEBUG 5, INFO 9, WARNING 13, ERROR 17,
    CRITICAL 21, each +1 up to +3), above 53 FATAL4 (24)."""
    if levelno < 10:
        return 0
    if levelno > 53:
        return 24
    tens, rest = divmod(int(levelno), 10)
    return (tens - 1) * 4 + 5 + min(rest, 3)
