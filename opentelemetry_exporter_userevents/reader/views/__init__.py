# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Views: what the host (process view) and the kernel (kernel view) add to a record."""
