# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The reader's native core: pages of our span and log tracepoints to checked OTLP/JSON
items in C (``core.c``, through cffi), for the decode stage (:mod:`..pipeline.native_chunk`);
the Python path is its reference, and its fallback where it is not built or not wanted
(:func:`.native_core.load_core`)."""
