# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The user_events test bed: run commands and tests on a kernel that has user_events.

Development and CI machines here lack ``CONFIG_USER_EVENTS``, so kernel behaviour is
tested in a qemu guest that boots a kernel image with it (``USER_EVENTS_KERNEL``) and
mounts the host's root file system read-only over 9p, so the guest runs the host's own
Python, virtual environment and checkout at the same paths.
"""
