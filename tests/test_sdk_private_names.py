# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The SDK's private names the package still relies on, where no public API does the same;
each check fails when the installed SDK changes one of them (CI runs it on the oldest and
the newest SDK the package accepts). The package itself no longer uses ``_ticker`` or
``_shutdown_event`` of the periodic reader, ``sdk.metrics._Gauge`` or
``sdk._logs._internal.std_to_otel``."""

from __future__ import annotations

import inspect
import logging
import re
from pathlib import Path

import pytest
from opentelemetry.sdk import _configuration as sdk_configuration
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs._internal import std_to_otel

import opentelemetry_exporter_userevents
from opentelemetry_exporter_userevents.configurator import _SDK_VARIABLE_WARNING
from opentelemetry_exporter_userevents.logging_handler import severity_of_level
from opentelemetry_exporter_userevents.reader.outputs.exporters import direct_sender


def test_the_handlers_level_mapping_is_the_sdk_handlers():
    """UserEventsLoggingHandler routes a ``logging`` record by the severity the SDK's
    LoggingHandler will give it; the mapping is copied, the SDK's is private."""
    levels = [*range(-5, 120), logging.DEBUG, logging.INFO, logging.WARNING, logging.CRITICAL]
    assert [severity_of_level(n) for n in levels] == [std_to_otel(n).value for n in levels]


def test_the_configurators_hooks_into_the_sdk_configuration_exist():
    """The configurator subclasses the SDK's configurator and, while configuring, replaces
    module functions the SDK's ``_initialize_components`` calls by name (no public hook
    takes a tracer provider, handler or reader factory)."""
    assert inspect.isclass(sdk_configuration._OTelSDKConfigurator)
    assert callable(sdk_configuration._initialize_components)
    for name in ("set_tracer_provider", "LoggingHandler", "_init_metrics"):
        assert callable(getattr(sdk_configuration, name)), name
    init_metrics = inspect.signature(sdk_configuration._init_metrics)
    assert next(iter(init_metrics.parameters)) == "exporters_or_readers"
    assert "exporter_args_map" in init_metrics.parameters
    source = inspect.getsource(sdk_configuration)
    for called in ("set_tracer_provider(", "LoggingHandler(", "_init_metrics("):
        assert called in source, f"_initialize_components no longer calls {called}"


def test_the_configurator_can_ask_for_the_logging_handler():
    """With OTEL_LOGS_EXPORTER=user_events and the variable unset, the configurator passes
    ``setup_logging_handler=True`` to ``_initialize_components`` and silences the SDK's
    warning about the variable (matched by the start of its text), which was not set."""
    parameters = inspect.signature(sdk_configuration._initialize_components).parameters
    assert "setup_logging_handler" in parameters
    assert _SDK_VARIABLE_WARNING in inspect.getsource(sdk_configuration)


def test_the_logger_providers_processors_are_where_the_configurator_looks():
    """The configurator finds the log processors to decide whether every log exporter is
    ours (``_multi_log_record_processor._log_record_processors``)."""
    provider = LoggerProvider(shutdown_on_exit=False)
    multi = provider._multi_log_record_processor
    assert isinstance(multi._log_record_processors, tuple | list)


def test_the_configuration_files_reader_factory_exists():
    """With a configuration file (opentelemetry-configuration, when installed), periodic
    readers of a user_events exporter are made by replacing its reader factory."""
    meter_provider = pytest.importorskip("opentelemetry.configuration._meter_provider")
    assert callable(meter_provider._create_periodic_metric_reader)
    assert callable(meter_provider._create_cardinality_limits)


def test_the_package_names_no_other_private_sdk_module_attribute():
    """Every private SDK name in the package's source is one checked above (a new one must
    come with its check here)."""
    allowed = {
        "_configuration",
        "_initialize_components",
        "_OTelSDKConfigurator",
        "_init_metrics",
        "_multi_log_record_processor",
        "_log_record_processors",
        "_meter_provider",
        "_create_periodic_metric_reader",
        "_create_cardinality_limits",
        "_logs",  # opentelemetry.sdk._logs: the SDK's only logs API (no public module yet)
        "_SUPPRESS_INSTRUMENTATION_KEY",  # the API's, as the SDK's own processors use it
    }
    root = Path(opentelemetry_exporter_userevents.__file__).parent
    found: set[str] = set()
    for path in root.rglob("*.py"):
        text = path.read_text()
        for line in text.splitlines():
            if "opentelemetry.sdk" not in line and "sdk_configuration" not in line:
                continue
            for word in re.split(r"[\s,(.\"']+", line):
                if word.startswith("_") and not word.startswith("__"):
                    found.add(word)
    assert found <= allowed, found - allowed


def test_the_otlp_http_exporters_client_keeps_its_request_configuration():
    """``--exporter otlp_proto_http`` posts bytes made straight from checked records as the
    exporter's client would post them (reader/outputs/exporters/otlp_http_output.py): to the
    client's ``_endpoint``, with its ``_headers``, ``_compression`` and ``_timeout``, and
    honours the exporter's ``_max_request_size`` (and, for metric points, leaves the exporter's
    ``export`` to split requests where ``_max_export_batch_size`` is set): no public
    attribute says what the client posts. Where
    the names are missing, the reader falls back to SDK objects; this check fails so that the
    fallback is not taken silently on a version we test with, and so that a client that
    stops posting with these names is noticed."""
    trace_exporter = pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    log_exporter = pytest.importorskip("opentelemetry.exporter.otlp.proto.http._log_exporter")
    http = pytest.importorskip("opentelemetry.exporter.otlp.common.http")
    client_source = inspect.getsource(http._OTLPHTTPClient)
    for used in ("self._endpoint,", "headers=self._headers", "self._timeout", "self._compression"):
        assert used in client_source, used
    metric_exporter = pytest.importorskip("opentelemetry.exporter.otlp.proto.http.metric_exporter")
    metric_source = inspect.getsource(metric_exporter.OTLPMetricExporter)
    for used in (  # the request the reader makes of metric points is the one export() makes
        "export_request = encode_metrics(metrics_data)",
        "if self._max_export_batch_size is None:",
        "_is_request_too_large(serialized_data, self._max_request_size)",
    ):
        assert used in metric_source, used
    for kind, exporter_class, path in (
        ("spans", trace_exporter.OTLPSpanExporter, "/t"),
        ("logs", log_exporter.OTLPLogExporter, "/l"),
        ("metrics", metric_exporter.OTLPMetricExporter, "/m"),
    ):
        exporter = exporter_class(
            endpoint=f"http://127.0.0.1:9{path}",
            headers={"x-tenant": "t1"},
            timeout=3.5,
            compression=trace_exporter.Compression.Gzip,
        )
        try:
            client = exporter._client
            assert client._endpoint == f"http://127.0.0.1:9{path}"
            assert client._headers["x-tenant"] == "t1"
            assert client._headers["Content-Encoding"] == "gzip"
            assert client._timeout == 3.5
            assert client._compression.value == "gzip"
            assert type(exporter._max_request_size) is int
            if kind != "metrics":
                source = inspect.getsource(exporter_class.export)
                assert "_is_request_too_large(serialized_data, self._max_request_size)" in source
            sender = direct_sender.direct_sender(exporter, kind)
            assert sender is not None
            poster = sender._poster
            assert (poster.host, poster.port, poster.path) == ("127.0.0.1", 9, path)
            assert (poster.timeout, poster.compression) == (3.5, "gzip")
            assert poster.headers == client._headers
        finally:
            exporter.shutdown()


def test_the_otlp_grpc_exporters_keep_their_channel_configuration():
    """``--exporter otlp_proto_grpc`` sends bytes made straight from checked records on a
    channel made as the exporter makes its own (reader/outputs/exporters/otlp_grpc_post.py): its
    ``_endpoint``, ``_insecure``, ``_credentials``, ``_channel_options`` and
    ``_compression``, its ``_headers`` as metadata, its ``_timeout``, and its
    ``_retryable_error_codes``. Where the names are missing the reader falls back to SDK
    objects; this check fails so that the fallback is not taken silently."""
    grpc = pytest.importorskip("grpc")
    base = pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.exporter")
    trace_exporter = pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    log_exporter = pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc._log_exporter")
    metric_exporter = pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.metric_exporter")
    from opentelemetry_exporter_userevents.reader.outputs.exporters import otlp_grpc_post  # noqa: PLC0415

    source = inspect.getsource(base.OTLPExporterMixin)
    for used in (
        "insecure_channel(\n                self._endpoint,\n                compression=self."
        "_compression,\n                options=self._channel_options,",
        "self._credentials,\n                compression=self._compression,",
        "metadata=self._headers,",
        "timeout=deadline_sec - time(),",
        "error.code() not in self._retryable_error_codes",
    ):
        assert used in source, used
    assert base._RETRYABLE_ERROR_CODES == otlp_grpc_post.RETRYABLE
    for kind, exporter_class in (
        ("spans", trace_exporter.OTLPSpanExporter),
        ("logs", log_exporter.OTLPLogExporter),
        ("metrics", metric_exporter.OTLPMetricExporter),
    ):
        exporter = exporter_class(
            endpoint="http://127.0.0.1:9",
            headers={"x-tenant": "t1"},
            timeout=3.5,
            compression=grpc.Compression.Gzip,
        )
        try:
            sender = direct_sender.direct_sender(exporter, kind)
            assert sender is not None
            poster = sender._poster
            assert isinstance(poster, otlp_grpc_post.GrpcPoster)
            assert (poster.target, poster.credentials) == ("127.0.0.1:9", None)
            assert (poster.timeout, poster.compression) == (3.5, grpc.Compression.Gzip)
            assert poster.headers == (("x-tenant", "t1"),)
            assert set(exporter._channel_options) <= set(poster.options)
            assert poster.retryable == otlp_grpc_post.RETRYABLE
            sender.close()
        finally:
            exporter.shutdown()
        secure = exporter_class(endpoint="https://collector.example:4317")
        try:
            sender = direct_sender.direct_sender(secure, kind)
            assert sender is not None
            assert isinstance(sender._poster.credentials, grpc.ChannelCredentials)
            assert sender._poster.target == "collector.example:4317"
        finally:
            secure.shutdown()
