# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""What the SDK and the OTLP encoder log about a hostile record reaches the operator's
terminal escaped, on one line."""

from __future__ import annotations

import logging

from opentelemetry_exporter_userevents.reader.terminal_text import escape_logging

HOSTILE = "key\x1b]0;pwned\x07\n\x9b2J"


def test_library_warnings_and_errors_are_escaped_on_one_line(capsys):
    handler = escape_logging()
    try:
        assert escape_logging() is handler  # once per process
        logger = logging.getLogger("opentelemetry.exporter.otlp.proto.common")
        logger.warning("Failed to encode key %s", HOSTILE)
        try:
            raise ValueError(HOSTILE)
        except ValueError:
            logger.exception("Failed to encode key %s", HOSTILE)
        logger.debug("not shown %s", HOSTILE)
    finally:
        logging.getLogger().removeHandler(handler)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert all("\x1b" not in line and "\x9b" not in line and "\x07" not in line for line in lines)
    assert lines[0].endswith("Failed to encode key key\\x1b]0;pwned\\x07\\n\\u009b2J")
    assert "(ValueError: key\\x1b]0;pwned" in lines[1]
