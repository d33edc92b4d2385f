# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Join: checked records to their resources and scopes (records wait for their resource),
counted; and the SDK objects an output that needs them is given."""
