# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Delivery around the exporters, as the Collector's ``exporterhelper``: the sending queue
in memory (``output_stage``, ``bounded_queue``) or persistent (``spool``, locked per
reader), its consumer thread, ``retry_on_failure`` with the throttle a collector asks for
and a timeout per attempt (``delivery``), and the probes of a collector that is down
(``collector_gate``)."""
