# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Sphinx configuration of the reference (``sphinx-build -W docs build/docs``, as CI runs
it): reStructuredText pages, and Markdown ones through myst-parser."""

project = "opentelemetry-exporter-userevents"
author = "opentelemetry-exporter-userevents developers"
copyright = "The OpenTelemetry Authors"
extensions = ["myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "alabaster"
