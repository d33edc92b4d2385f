# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Outputs: OTLP/JSON, OTLP protobuf, OTLP/HTTP, the tree view and exporters."""
