"""An OpenTelemetry SDK per test: in-memory spans and metric points, and a canary search."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from demos.guard_attacks import search_canaries
from session_keeper import Telemetry


@attrs.define
class Otel:
    """One test's providers (never the global ones) and what they recorded."""

    telemetry: Telemetry
    tracer_provider: TracerProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        """The finished spans (named ``name``), oldest first."""
        done = list(self.exporter.get_finished_spans())
        return [s for s in done if name is None or s.name == name]

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, value)`` of each point of ``metric``; a histogram's value is its
        ``(count, sum)``."""
        data = self.reader.get_metrics_data()
        out: list[tuple[dict[str, Any], Any]] = []
        for rm in data.resource_metrics if data is not None else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name != metric:
                        continue
                    for p in m.data.data_points:
                        point: Any = p
                        value = (point.count, point.sum) if hasattr(p, "count") else point.value
                        out.append((dict(p.attributes or {}), value))
        return out

    def dump(self) -> bytes:
        """Every span (attributes, events, status) and every metric point, serialised."""
        spans = "\n".join(s.to_json() for s in self.spans())
        data = self.reader.get_metrics_data()
        metrics = data.to_json() if data is not None else ""
        return (spans + "\n" + metrics).encode()

    def canaries(self, **canaries: str) -> list[str]:
        """Where any canary shows up in what was recorded (empty: nowhere)."""
        return search_canaries(canaries, {"telemetry": self.dump()})


def attributes(span: ReadableSpan) -> dict[str, Any]:
    """A span's attributes as a plain dict."""
    return dict(span.attributes or {})


@pytest.fixture
def otel() -> Iterator[Otel]:
    """SDK providers with an in-memory span exporter and metric reader."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(
        telemetry=Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider),
        tracer_provider=tracer_provider,
        exporter=exporter,
        reader=reader,
    )
    tracer_provider.shutdown()
    meter_provider.shutdown()
