# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Live ingest: the reader's tracefs instances, the tracepoints it holds, announcements,
and the per-CPU pipes it reads."""
