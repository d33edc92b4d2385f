# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The write side's internals (private): what the public exporters, processors and sampler
are made of. A span or log goes :mod:`.exporter_base` (the shared export loop) -> an encoder
(:mod:`.span_encoder`, :mod:`.log_encoder`, with :mod:`.attributes` and :mod:`.fit`) ->
:mod:`.writer` (registrations, one ``writev``, exact counts). It sits on ``abi`` and
``record`` and never imports the read side."""
