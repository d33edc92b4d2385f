# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The drop-in path with the enable-bit-first processors: ``OTEL_PYTHON_CONFIGURATOR=user_events``.

The SDK's configurator, which ``opentelemetry-instrument`` runs, wraps every exporter named
in ``OTEL_TRACES_EXPORTER`` in a ``BatchSpanProcessor``: each span is queued before the
exporter can check the enable bit, which costs a fifth or more of a span's own cost even
while nobody listens. This configurator is the SDK's, except that ``user_events``
exporters get :class:`UserEventsSpanProcessor` and :class:`UserEventsLogRecordProcessor`;
other exporters keep the batch processors. With ``OTEL_CONFIG_FILE``, the file's
``simple`` or ``batch`` processors around a ``user_events`` exporter are replaced the same
way (:func:`configure_sdk`). ``OTEL_METRICS_EXPORTER=user_events``, and a file's
``periodic`` reader of a ``user_events`` exporter, get :class:`UserEventsMetricReader`,
which collects nothing while nobody listens (:func:`user_events_metric_readers`).

``logging`` records: when ``OTEL_LOGS_EXPORTER`` names ``user_events`` and
``OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED`` is unset, the root logger gets a handler
as if it were ``true`` (:func:`logging_handler_by_default`), so the drop-in line exports the
application's ``logging`` records with no other variable; ``false`` (or any value other
than ``true``) still turns the handler off.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any

from opentelemetry import _logs, trace
from opentelemetry.sdk import _configuration as sdk_configuration
from opentelemetry.sdk._configuration import _initialize_components, _OTelSDKConfigurator
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.environment_variables import OTEL_CONFIG_FILE
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from opentelemetry_exporter_userevents._export.console_logging import console_logging_kept
from opentelemetry_exporter_userevents.lean_tracer import UserEventsTracerProvider
from opentelemetry_exporter_userevents.log_exporter import UserEventsLogExporter
from opentelemetry_exporter_userevents.logging_handler import UserEventsLoggingHandler
from opentelemetry_exporter_userevents.metric_exporter import (
    UserEventsMetricExporter,
    UserEventsMetricReader,
)
from opentelemetry_exporter_userevents.processors import (
    UserEventsLogRecordProcessor,
    UserEventsSpanProcessor,
)
from opentelemetry_exporter_userevents.sampler import UserEventsSampler
from opentelemetry_exporter_userevents.span_exporter import UserEventsSpanExporter

_logger = logging.getLogger(__name__)

NAME = "user_events"
"""The exporter's entry-point name, in OTEL_TRACES_EXPORTER and in configuration files."""


class UserEventsConfigurator(_OTelSDKConfigurator):
    """The SDK's configurator, with enable-bit-first processors for ``user_events``."""

    def _configure(self, **kwargs: Any) -> None:
        config_file = os.environ.get(OTEL_CONFIG_FILE)
        if config_file:
            ignored = sorted(set(kwargs) - {"auto_instrumentation_version"})
            if ignored:
                _logger.warning("%s is set; ignoring configurator kwargs %s", OTEL_CONFIG_FILE,
                                ignored)  # fmt: skip
            with user_events_metric_readers():
                configure_file(config_file)
            return
        kwargs = with_processors(kwargs)
        by_default = "setup_logging_handler" not in kwargs and logging_handler_by_default(
            os.environ,
            under_instrument="auto_instrumentation_version" in kwargs,
            log_exporter_names=kwargs.get("log_exporter_names") or (),
        )
        if by_default:
            kwargs["setup_logging_handler"] = True
        with (
            user_events_metric_readers(),
            lean_tracer_provider(),
            lean_logging_handler(),
            console_logging_kept(),
            warnings.catch_warnings(),
        ):
            if by_default:  # the SDK's warning is about the variable, which was not set
                warnings.filterwarnings("ignore", _SDK_VARIABLE_WARNING, DeprecationWarning)
            _initialize_components(**kwargs)


LOGGING_AUTO_INSTRUMENTATION = "OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED"
"""The SDK's switch for its ``logging`` handler (``true`` on; any other value off)."""

_SDK_VARIABLE_WARNING = "The `OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED` environment"


def logging_handler_by_default(
    environ: Mapping[str, str], *, under_instrument: bool, log_exporter_names: Iterable[str] = ()
) -> bool:
    """Whether the SDK's ``logging`` handler is attached though
    ``OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED`` does not ask for it: only when that
    variable is unset (or empty, which the specification reads as unset), a log exporter
    is ``user_events`` (in ``OTEL_LOGS_EXPORTER`` or a distribution's ``log_exporter_names``),
    and, under ``opentelemetry-instrument``, no installed
    ``opentelemetry-instrumentation-logging`` attaches a handler of its own (it does so
    unless that variable is ``true``; two handlers would export every record twice)."""
    if environ.get(LOGGING_AUTO_INSTRUMENTATION, "").strip():
        return False  # the user's choice, read by the SDK as it always is
    names = [name.strip() for name in environ.get("OTEL_LOGS_EXPORTER", "").split(",")]
    if NAME not in [*names, *log_exporter_names]:
        return False
    return not (under_instrument and _logging_instrumentation_attaches_a_handler(environ))


def _logging_instrumentation_attaches_a_handler(environ: Mapping[str, str]) -> bool:
    """Whether ``opentelemetry-instrument`` will run a ``logging`` instrumentor that adds
    its own handler (``opentelemetry-instrumentation-logging``, which does unless
    ``OTEL_PYTHON_LOG_AUTO_INSTRUMENTATION=false`` or the instrumentation is disabled)."""
    try:
        if not entry_points(group="opentelemetry_instrumentor", name="logging"):
            return False
    except Exception:  # noqa: BLE001 - unreadable metadata: attach nothing, as the SDK
        return True
    disabled = [
        x.strip() for x in environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",")
    ]
    if "logging" in disabled or "*" in disabled:
        return False
    return environ.get("OTEL_PYTHON_LOG_AUTO_INSTRUMENTATION", "true").strip().lower() == "true"


def with_processors(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``_initialize_components`` arguments that put user_events exporters in the
    enable-bit-first processors and other exporters in the processors given (or batch)."""
    span_fallback = kwargs.get("export_span_processor") or BatchSpanProcessor
    log_fallback = kwargs.get("export_log_record_processor") or BatchLogRecordProcessor

    def span_processor(exporter: SpanExporter, *args: Any, **options: Any) -> SpanProcessor:
        if isinstance(exporter, UserEventsSpanExporter):
            return UserEventsSpanProcessor(exporter)
        return span_fallback(exporter, *args, **options)

    def log_processor(
        exporter: LogRecordExporter, *args: Any, **options: Any
    ) -> LogRecordProcessor:
        if isinstance(exporter, UserEventsLogExporter):
            return UserEventsLogRecordProcessor(exporter)
        return log_fallback(exporter, *args, **options)

    return {
        **kwargs,
        "export_span_processor": span_processor,
        "export_log_record_processor": log_processor,
    }


def configure_file(path: str) -> None:
    """Load a declarative configuration file and apply it with :func:`configure_sdk`."""
    try:
        from opentelemetry.configuration import load_config_file  # noqa: PLC0415 - optional
    except ImportError as exc:
        raise RuntimeError(
            f"{OTEL_CONFIG_FILE} is set but opentelemetry-configuration is not installed. "
            "Install it with: pip install opentelemetry-configuration"
        ) from exc
    configure_sdk(load_config_file(path))


def configure_sdk(config: Any) -> None:
    """``opentelemetry.configuration.configure_sdk``, except that each ``simple`` or
    ``batch`` processor around a ``user_events`` exporter becomes an enable-bit-first
    processor, added to the provider after the file's other processors.

    ``config`` is an ``OpenTelemetryConfiguration``; it is not modified.
    """
    from opentelemetry.configuration import configure_sdk as configure  # noqa: PLC0415

    config = copy.copy(config)
    span_settings = _take(config, "tracer_provider")
    log_settings = _take(config, "logger_provider")
    configure(config)
    if config.disabled:
        return
    if span_settings:
        tracer_provider = trace.get_tracer_provider()
        if isinstance(tracer_provider, TracerProvider):
            for settings in span_settings:
                span_exporter = UserEventsSpanExporter(**settings)
                tracer_provider.add_span_processor(UserEventsSpanProcessor(span_exporter))
        else:
            _not_sdk(TracerProvider)
    if log_settings:
        logger_provider = _logs.get_logger_provider()
        if isinstance(logger_provider, LoggerProvider):
            for settings in log_settings:
                log_exporter = UserEventsLogExporter(**settings)
                logger_provider.add_log_record_processor(UserEventsLogRecordProcessor(log_exporter))
        else:
            _not_sdk(LoggerProvider)


def _take(config: Any, section: str) -> list[dict[str, Any]]:
    """Remove the user_events processors from ``config.<section>`` (copying what changes);
    return each one's exporter settings, in order."""
    provider = getattr(config, section)
    if provider is None:
        return []
    kept, taken = [], []
    for processor in provider.processors:
        settings = _user_events_settings(processor)
        if settings is None:
            kept.append(processor)
        else:
            taken.append(settings)
    if taken:
        provider = copy.copy(provider)
        provider.processors = kept
        setattr(config, section, provider)
    return taken


def _user_events_settings(processor: Any) -> dict[str, Any] | None:
    """The exporter settings of a simple or batch processor whose exporter is the
    user_events plugin, as the configuration package would load it; else None."""
    inner = getattr(processor, "simple", None) or getattr(processor, "batch", None)
    return _plugin_settings(getattr(inner, "exporter", None))


def _plugin_settings(exporter: Any) -> dict[str, Any] | None:
    """The settings of an exporter configuration that names the user_events plugin."""
    if exporter is None or not dataclasses.is_dataclass(exporter):
        return None
    if any(getattr(exporter, f.name) is not None for f in dataclasses.fields(exporter)):
        return None  # a built-in exporter (otlp_http, console, ...) takes precedence
    plugins = getattr(exporter, "additional_properties", None) or {}
    name = next(iter(plugins), None)
    if name != NAME:
        return None
    return dict(plugins[name] or {})


def _not_sdk(kind: type) -> None:
    _logger.warning("user_events: the global provider is no SDK %s; processors not added",
                    kind.__name__)  # fmt: skip


@contextlib.contextmanager
def lean_logging_handler() -> Iterator[None]:
    """While configuring: the logging handler the SDK installs (with
    ``OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED=true``, or by
    :func:`logging_handler_by_default`) becomes
    :class:`UserEventsLoggingHandler` when every processor of its provider is a
    :class:`UserEventsLogRecordProcessor` (with another exporter, records must still be built)."""
    sdk_handler = getattr(sdk_configuration, "LoggingHandler")  # noqa: B009

    def make_handler(level: int = logging.NOTSET, logger_provider: Any = None) -> Any:
        multi = getattr(logger_provider, "_multi_log_record_processor", None)
        processors = list(getattr(multi, "_log_record_processors", None) or [None])
        if all(isinstance(p, UserEventsLogRecordProcessor) for p in processors):
            return UserEventsLoggingHandler(processors[0].exporter, level, logger_provider)
        return sdk_handler(level=level, logger_provider=logger_provider)

    setattr(sdk_configuration, "LoggingHandler", make_handler)  # noqa: B010
    try:
        yield
    finally:
        setattr(sdk_configuration, "LoggingHandler", sdk_handler)  # noqa: B010


@contextlib.contextmanager
def lean_tracer_provider() -> Iterator[None]:
    """While configuring: an SDK tracer provider whose sampler is a
    :class:`UserEventsSampler` (``OTEL_TRACES_SAMPLER=user_events``) is installed wrapped in
    :class:`UserEventsTracerProvider`, which starts no span at all while nobody listens."""
    set_provider = getattr(sdk_configuration, "set_tracer_provider")  # noqa: B009

    def set_lean_provider(provider: trace.TracerProvider) -> None:
        if isinstance(provider, TracerProvider) and isinstance(provider.sampler, UserEventsSampler):
            provider = UserEventsTracerProvider(provider)
        set_provider(provider)

    setattr(sdk_configuration, "set_tracer_provider", set_lean_provider)  # noqa: B010
    try:
        yield
    finally:
        setattr(sdk_configuration, "set_tracer_provider", set_provider)  # noqa: B010


@contextlib.contextmanager
def user_events_metric_readers() -> Iterator[None]:
    """While configuring: the SDK's and the configuration file's periodic reader of a
    ``user_events`` metric exporter become :class:`UserEventsMetricReader`, with the same
    exporter settings, interval and timeout. (Neither builder takes a reader factory, so
    their module functions are replaced for the duration, then restored.)"""
    init_metrics = sdk_configuration._init_metrics

    def init_user_events_metrics(
        exporters_or_readers: dict[str, type], *args: Any, **kwargs: Any
    ) -> Any:
        exporter_args_map = kwargs.get("exporter_args_map") or {}
        replaced: dict[str, Any] = {}
        for name, cls in exporters_or_readers.items():
            if isinstance(cls, type) and issubclass(cls, UserEventsMetricExporter):
                settings = exporter_args_map.get(cls, {})
                exporter_args_map = {**exporter_args_map, UserEventsMetricReader: settings}
                cls = UserEventsMetricReader
            replaced[name] = cls
        if "exporter_args_map" in kwargs or exporter_args_map:
            kwargs["exporter_args_map"] = exporter_args_map
        return init_metrics(replaced, *args, **kwargs)

    restore: list[tuple[Any, str, Any]] = [(sdk_configuration, "_init_metrics", init_metrics)]
    sdk_configuration._init_metrics = init_user_events_metrics
    try:
        from opentelemetry.configuration import _meter_provider  # noqa: PLC0415 - optional
    except ImportError:
        _meter_provider = None  # type: ignore[assignment]
    if _meter_provider is not None:
        create_periodic = _meter_provider._create_periodic_metric_reader

        def create_user_events_periodic(config: Any) -> Any:
            settings = _plugin_settings(getattr(config, "exporter", None))
            if settings is None:
                return create_periodic(config)
            interval = config.interval
            timeout = config.timeout
            return UserEventsMetricReader(
                UserEventsMetricExporter(**settings),
                float(interval if interval is not None else 60_000),
                float(timeout if timeout is not None else 30_000),
                _meter_provider._create_cardinality_limits(config.cardinality_limits),
            )

        restore.append((_meter_provider, "_create_periodic_metric_reader", create_periodic))
        setattr(_meter_provider, "_create_periodic_metric_reader", create_user_events_periodic)  # noqa: B010
    try:
        yield
    finally:
        for module, name, original in restore:
            setattr(module, name, original)
