# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Decoding: ring-buffer records to decoded records, then the validation boundary to
checked records (the one door every later stage goes through)."""
