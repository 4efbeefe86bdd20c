"""The tracer and meter the library reports through, and the settings that choose them."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from types import ModuleType, TracebackType
from typing import Any, Final, Protocol

import attrs

from session_keeper._telemetry.names import COUNTERS, HISTOGRAMS
from session_keeper._util.extras import require_extra
from session_keeper._util.redact import redact_text
from session_keeper._util.version import package_version
from session_keeper.errors import InvalidArgumentType

__all__ = ["DEFAULT_INSTRUMENTS", "Instruments", "SpanLike", "Telemetry", "instruments_for"]

#: The instrumentation scope every span and metric is reported under.
SCOPE: Final = "session_keeper"


def _load(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_api: dict[str, ModuleType | None] = {}


def _current_span() -> tuple[Callable[[Any], Any], Callable[[], Any]]:
    # ``opentelemetry.trace.get_current_span`` and ``opentelemetry.context.get_current``,
    # looked up once (every traced turn asks).
    global _CURRENT
    if _CURRENT is None:
        trace, context = _module("opentelemetry.trace"), _module("opentelemetry.context")
        assert trace is not None and context is not None
        _CURRENT = (trace.get_current_span, context.get_current)
    return _CURRENT


_CURRENT: tuple[Callable[[Any], Any], Callable[[], Any]] | None = None


def _module(name: str) -> ModuleType | None:
    # Imported on first use, not when session_keeper is: an application that never
    # sets a provider pays one failed (or cached) import, once.
    if name not in _api:
        _api[name] = _load(name)
    return _api[name]


@attrs.frozen(kw_only=True, cache_hash=True)
class Telemetry:
    """Where the keeper, the job loop and the pool send their OpenTelemetry spans and metrics.

    ``tracer_provider`` / ``meter_provider``: an OpenTelemetry ``TracerProvider`` /
    ``MeterProvider`` (``None``: the global one, as set with
    ``opentelemetry.trace.set_tracer_provider`` — Logfire and the SDK's auto-configuration
    set it). ``enabled=False`` records nothing whatever is set. Without the ``otel`` extra
    (``opentelemetry-api``) or any provider, nothing is recorded and nothing is built; a
    provider given without the extra raises :class:`~session_keeper.errors.MissingExtra`
    (``pip install 'session-keeper[otel]'``) rather than record nothing in silence.

    >>> Telemetry()
    Telemetry(tracer_provider=None, meter_provider=None, enabled=True)
    """

    tracer_provider: Any = None
    meter_provider: Any = None
    enabled: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))

    def __attrs_post_init__(self) -> None:
        if self.tracer_provider is not None or self.meter_provider is not None:
            require_extra("otel", "Telemetry(tracer_provider=/meter_provider=)")


class SpanLike(Protocol):
    """What the library calls on a span: an OpenTelemetry ``Span``, or the no-op one.

    Build attributes only when :meth:`is_recording` says a span will keep them.
    """

    def is_recording(self) -> bool:
        """Whether attributes and events set now are kept."""
        ...

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute."""
        ...

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Set several attributes."""
        ...

    def add_event(
        self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None
    ) -> None:
        """Add a timestamped event."""
        ...


class _NoSpan:
    """The span of a run without a provider: keeps nothing, costs a method call."""

    __slots__ = ()

    def is_recording(self) -> bool:
        return False

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass

    def add_event(
        self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None
    ) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


NO_SPAN: Final = _NoSpan()


class _Span:
    """A started span made current; on an exception it also gets ``error.type``."""

    __slots__ = ("_cm", "_span")

    def __init__(self, cm: Any) -> None:
        self._cm = cm
        self._span: Any = None

    def __enter__(self) -> SpanLike:
        self._span = self._cm.__enter__()
        span: SpanLike = self._span
        return span

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        span = self._span
        if exc_type is not None and span is not None:
            # Not the SDK's record_exception: an exception's text may quote a cookie or a
            # URL's token, so the span keeps its type and the redacted text only.
            span.set_attribute("error.type", exc_type.__qualname__)
            trace = _module("opentelemetry.trace")
            assert trace is not None
            text = redact_text(f"{exc_type.__name__}: {exc}")
            span.set_status(trace.Status(trace.StatusCode.ERROR, text))
        return bool(self._cm.__exit__(exc_type, exc, tb))


#: The SDK would record an exception's message (it may quote a secret): :class:`_Span` does.
_QUIET: Final = {"record_exception": False, "set_status_on_exception": False}


def _is_unset(provider: object) -> bool:
    # The API's stand-ins before any provider is set (the proxy) or by choice (no-op):
    # spans from them are dropped, so the library does not even start one.
    name = type(provider).__name__
    return name.startswith(("_Proxy", "Proxy", "NoOp", "_NoOp"))


#: How long "no provider is set" is believed before the global providers are asked
#: again (seconds): asking costs an ``os.environ`` lookup, a sizeable part of a turn.
REASK_S: Final = 1.0


def _provider(api: str, given: Any) -> Any:
    """``given``, else the global provider of ``api`` (``opentelemetry.trace`` or
    ``.metrics``); ``None`` when the API is absent or nothing would keep what is sent."""
    module = _module(api)
    if module is None:
        return None
    getter = "get_tracer_provider" if api.endswith("trace") else "get_meter_provider"
    provider = given or getattr(module, getter)()
    return None if _is_unset(provider) else provider


class Instruments:
    """The library's tracer and meter for one :class:`Telemetry`, resolved when first used.

    A provider found is kept; none found is asked again :data:`REASK_S` later (an
    application may set its provider after building the keeper: it is heard within a
    second).
    """

    def __init__(self, telemetry: Telemetry | None = None) -> None:
        self._settings = telemetry if telemetry is not None else Telemetry()
        self._tracer: Any = None
        self._meter: Any = None
        self._counters: dict[str, Any] = {}
        self._histograms: dict[str, Any] = {}
        # time.monotonic() before which "no tracer" / "no meter" still holds.
        self._no_tracer_until = 0.0
        self._no_meter_until = 0.0

    @property
    def settings(self) -> Telemetry:
        """The settings these instruments follow."""
        return self._settings

    def tracer(self) -> Any:
        """The OpenTelemetry tracer, or ``None`` when nothing would keep a span."""
        if self._tracer is not None:
            return self._tracer
        settings = self._settings
        if not settings.enabled:
            return None
        now = time.monotonic()
        if now < self._no_tracer_until:
            return None
        provider = _provider("opentelemetry.trace", settings.tracer_provider)
        if provider is None:
            self._no_tracer_until = now + REASK_S
            return None
        self._tracer = provider.get_tracer(SCOPE, package_version())
        return self._tracer

    def meter(self) -> Any:
        """The OpenTelemetry meter, or ``None`` when nothing would keep a point."""
        if self._meter is not None:
            return self._meter
        settings = self._settings
        if not settings.enabled:
            return None
        now = time.monotonic()
        if now < self._no_meter_until:
            return None
        provider = _provider("opentelemetry.metrics", settings.meter_provider)
        if provider is None:
            self._no_meter_until = now + REASK_S
            return None
        self._meter = provider.get_meter(SCOPE, package_version())
        return self._meter

    @property
    def tracing(self) -> bool:
        """Whether a span started now would be kept (build its attributes only then)."""
        return self.tracer() is not None

    def span(self, name: str, *, kind: str | None = None, root: bool = False) -> _Span | _NoSpan:
        """A span made current for a ``with`` block (the caller's current span is its
        parent; ``root``: none is), or the no-op span. ``kind``: ``"client"`` etc.
        (default internal)."""
        tracer = self.tracer()
        if tracer is None:
            return NO_SPAN
        if kind is None and not root:
            return _Span(tracer.start_as_current_span(name, **_QUIET))
        trace = _module("opentelemetry.trace")
        context = _module("opentelemetry.context")
        assert trace is not None and context is not None
        options: dict[str, Any] = dict(_QUIET)
        if kind is not None:
            options["kind"] = trace.SpanKind[kind.upper()]
        if root:
            options["context"] = context.Context()
        return _Span(tracer.start_as_current_span(name, **options))

    def in_trace(self) -> bool:
        """Whether the caller's active span is recording: a trace someone will look at."""
        if self.tracer() is None:
            return False
        get_current_span, get_current_context = _current_span()
        context = get_current_context()
        # An empty context holds no span: the common turn, outside any trace, stops here.
        return bool(context) and bool(get_current_span(context).is_recording())

    def span_of_past(self, name: str, start_ns: int, attributes: Mapping[str, Any]) -> None:
        """A span of what already happened, from ``start_ns`` (``time.time_ns()``) to now:
        for work that turned out worth a span only once it was done."""
        tracer = self.tracer()
        if tracer is not None:
            tracer.start_span(name, start_time=start_ns, attributes=attributes, **_QUIET).end()

    def current_span(self) -> SpanLike:
        """The caller's active span (recording or not), or the no-op span."""
        if self.tracer() is None:
            return NO_SPAN
        trace = _module("opentelemetry.trace")
        assert trace is not None
        span: SpanLike = trace.get_current_span()
        return span

    def add(self, name: str, value: int = 1, attributes: Mapping[str, Any] | None = None) -> None:
        """Add ``value`` to the counter ``name`` (one of ``names.COUNTERS``)."""
        counter = self._counters.get(name)
        if counter is None:
            meter = self.meter()
            if meter is None:
                return
            unit, description = COUNTERS[name]
            counter = self._counters[name] = meter.create_counter(
                name, unit=unit, description=description
            )
        counter.add(value, attributes)

    def record(self, name: str, value: float, attributes: Mapping[str, Any] | None = None) -> None:
        """Record ``value`` in the histogram ``name`` (one of ``names.HISTOGRAMS``)."""
        histogram = self._histograms.get(name)
        if histogram is None:
            meter = self.meter()
            if meter is None:
                return
            unit, description = HISTOGRAMS[name]
            histogram = self._histograms[name] = meter.create_histogram(
                name, unit=unit, description=description
            )
        histogram.record(value, attributes)

    @property
    def metering(self) -> bool:
        """Whether a metric point added now would be kept."""
        return self.meter() is not None


#: What parts without settings of their own (the stores) report through: the globals.
DEFAULT_INSTRUMENTS: Final = Instruments()


_by_settings: dict[Telemetry, Instruments] = {DEFAULT_INSTRUMENTS.settings: DEFAULT_INSTRUMENTS}


def instruments_for(telemetry: Telemetry | None) -> Instruments:
    """The instruments of ``telemetry`` (``None``: the global providers), one per settings
    value, so every part given the same settings shares one tracer and one set of meters.

    Raises :class:`~session_keeper.errors.InvalidArgumentType` for anything but a
    :class:`Telemetry` or ``None``.
    """
    if telemetry is None:
        return DEFAULT_INSTRUMENTS
    if not isinstance(telemetry, Telemetry):
        raise InvalidArgumentType(f"telemetry must be a Telemetry, not {type(telemetry).__name__}")
    found = _by_settings.get(telemetry)
    if found is None:
        found = _by_settings[telemetry] = Instruments(telemetry)
    return found
