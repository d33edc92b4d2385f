# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Join: checked records to their resources and scopes (records wait for their resource),
counted. No span or log SDK object is built here (outputs/exporters/sdk_objects.py)."""
