# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Benchmarks: what a span or log record costs in each configuration (``python -m
benchmarks``). Not part of the tests."""
