# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's pipeline, built once by a command: a source (a live instance, a trace.dat,
a perf.data), the decode stage (in-process, or its worker processes), the join with its
views, and delivery. See docs/reader-pipeline.md."""
