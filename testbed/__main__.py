# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

import sys

from testbed.guest import main

sys.exit(main())
