# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The ``otel-userevents`` subcommands, one module each; :mod:`..cli` parses the command
line and calls them."""
