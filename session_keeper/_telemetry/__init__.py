"""OpenTelemetry traces and metrics, the way instrumentation libraries do it.

The library depends on ``opentelemetry-api`` only when the ``otel`` extra is installed,
imports it lazily, and records nothing (and builds no attribute) until a tracer or meter
provider is set: the global one (``opentelemetry.trace.set_tracer_provider``) unless a
:class:`Telemetry` names its own. Every part of the keeper (turns, tabs, logins, the Guard,
jobs, stores) reports through :class:`Instruments`.
"""

from session_keeper._telemetry.instruments import (
    DEFAULT_INSTRUMENTS,
    Instruments,
    SpanLike,
    Telemetry,
    instruments_for,
)
from session_keeper._telemetry.names import event_fields, url_attributes

__all__ = [
    "DEFAULT_INSTRUMENTS",
    "Instruments",
    "SpanLike",
    "Telemetry",
    "event_fields",
    "instruments_for",
    "url_attributes",
]
