# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Exporters, as the Collector names them: each encodes a batch into one request and sends
it (OTLP/HTTP, OTLP/gRPC, OTLP/JSON lines, the tree view, SDK objects for any other
exporter); nothing here queues, spools or decides when to send again."""
