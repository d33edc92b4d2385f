# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Hist triggers: the kernel's own histograms of our tracepoints."""
