"""Row 19: what OpenTelemetry tracing costs a turn and a guarded page load, on against off.

Two real Chromium browsers on the local sites, each behind a :class:`Guard` and signed in
to ``billing.example``: one keeper reports to an OpenTelemetry SDK (a ``TracerProvider``
with a ``BatchSpanProcessor`` whose exporter drops every batch, and a ``MeterProvider``
with an in-memory reader), the other to no provider (``Telemetry()`` with nothing set: the
library's no-op path). Both halves run in one process, rounds interleaved, the order
flipped every round, so machine noise hits both sides alike:

- **turn** (row 1's measure): ``--calls`` of ``ensure(conv)`` + ``keeper.tab(conv)`` on
  each keeper per round; the round's ratio is tracing-on µs over tracing-off µs.
  Also against row 1's yardstick, one ``page.evaluate("1")`` (a CDP round trip) timed
  in the same rounds: what a traced turn costs an agent in round trips.
- **guarded load** (row 9's measure, its pieces reused): the signed-in ``/gallery`` page
  with ``--subresources`` PNG images, loaded ``A B B A`` per round, wall and CPU per load
  (this process, the driver and Chromium), on over off.

Goal ≤ 1.05× for each. Last lines: ``BENCH`` records (row 19) and::

    RESULT turn_on_us=... turn_off_us=... turn_ratio=... load_on_ms=... load_off_ms=...
           load_ratio=... cpu_ratio=... spans=N

Usage: ``python benchmarks/telemetry_overhead.py [--rounds N] [--calls N] [--subresources N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from playwright.async_api import Page

from benchmarks._report import emit
from benchmarks.guard_overhead import BILLING, Side, driver_of, load, signed_in
from session_keeper import Grant, Guard, IdleTimeouts, PlaywrightBackend, SessionKeeper, Telemetry
from session_keeper.testing import LocalSites


class DroppingExporter(SpanExporter):
    """Counts the spans it is handed and keeps none: the export itself costs nothing."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


async def turns(keeper: SessionKeeper[Page], calls: int, parent: Any = None) -> float:
    """Mean µs of one turn (``ensure`` + ``tab``) over ``calls``; inside the span
    ``parent`` (a context manager: the agent's node) when given."""
    with parent if parent is not None else contextlib.nullcontext():
        start = time.perf_counter()
        for _ in range(calls):
            await keeper.ensure("billing")
            await keeper.tab("billing")
        return (time.perf_counter() - start) / calls * 1e6


Series = dict[str, list[float]]


async def evaluates(page: Page, calls: int) -> float:
    """Mean µs of one ``page.evaluate("1")`` over ``calls`` (row 1's yardstick)."""
    start = time.perf_counter()
    for _ in range(calls):
        await page.evaluate("1")
    return (time.perf_counter() - start) / calls * 1e6


async def run(
    rounds: int, calls: int, subresources: int
) -> tuple[Series, Series, Series, Series, int]:
    """Per-round figures ``(turn µs, turn in a caller's span µs, load ms, load CPU ms)``,
    each ``[on|off]`` (turn also ``[rtt]``: one evaluate), and the number of spans the
    tracing side exported."""
    exporter = DroppingExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    settings = {
        "on": Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider),
        "off": Telemetry(),
    }
    with LocalSites() as sites, tempfile.TemporaryDirectory(prefix="bench-otel-") as tmp:
        keepers: dict[str, SessionKeeper[Page]] = {}
        guards: dict[str, Guard] = {}
        for name, telemetry in settings.items():
            backend = PlaywrightBackend(
                Path(tmp) / name, host_resolver_rules=sites.host_resolver_rules
            )
            keepers[name] = SessionKeeper(
                backend,
                grants=[Grant("billing", BILLING, actions={"read", "write"})],
                idle_timeouts=IdleTimeouts(browser=timedelta(hours=6)),
                telemetry=telemetry,
            )
            guards[name] = Guard(keepers[name])
        # PNG images, as row 9's: an SVG image is a document of its own to the renderer,
        # whose work spread single rounds far more than the requests' did.
        url = sites.url(BILLING, f"/gallery?n={subresources}&img=png")
        turn: Series = {"on": [], "off": [], "rtt": []}
        # The same turns inside an agent's span (a graph node): each gets a child span.
        nested: Series = {"on": [], "off": []}
        agent = tracer_provider.get_tracer("the-agent")
        wall: Series = {"on": [], "off": []}
        cpu: Series = {"on": [], "off": []}
        async with keepers["on"], keepers["off"]:
            sides: dict[str, Side] = {}
            for name, keeper in keepers.items():
                page = await signed_in(keeper, sites)
                sides[name] = Side(page, driver_of(Path(tmp) / name))
                await turns(keeper, calls)  # warm-up
                for _ in range(2):
                    await load(sides[name], url, subresources)
            for i in range(rounds):
                order = ("on", "off") if i % 2 == 0 else ("off", "on")
                for name in order:
                    turn[name].append(await turns(keepers[name], calls))
                for name in order:
                    node = agent.start_as_current_span("agent.node") if name == "on" else None
                    nested[name].append(await turns(keepers[name], calls, node))
                turn["rtt"].append(
                    await evaluates(await keepers["on"].unguarded_page("billing"), calls)
                )
                ms = {"on": 0.0, "off": 0.0}
                work = {"on": 0.0, "off": 0.0}
                for name in (*order, *reversed(order)):
                    try:
                        w, c = await load(sides[name], url, subresources)
                    except Exception:
                        print(f"a {name} load failed; the Guard's blocks: {guards[name].blocks}")
                        raise
                    ms[name] += w
                    work[name] += c
                for name in ms:
                    wall[name].append(ms[name] / 2)
                    cpu[name].append(work[name] / 2)
    tracer_provider.shutdown()  # flushes the batches: every span reached the exporter
    meter_provider.shutdown()
    return turn, nested, wall, cpu, exporter.spans


def ratios(series: Series) -> list[float]:
    """Each round's on / off."""
    return [a / b for a, b in zip(series["on"], series["off"], strict=True)]


def main() -> None:
    """Run, print per-round figures, the BENCH records and the RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--subresources", type=int, default=40)
    args = parser.parse_args()
    turn, nested, wall, cpu, spans = asyncio.run(run(args.rounds, args.calls, args.subresources))
    for n in range(args.rounds):
        print(
            f"round {n + 1}: turn {turn['on'][n]:.1f}/{turn['off'][n]:.1f} us, "
            f"load {wall['on'][n]:.0f}/{wall['off'][n]:.0f} ms, "
            f"cpu {cpu['on'][n]:.0f}/{cpu['off'][n]:.0f} ms (on/off)"
        )
    med: dict[str, Any] = {
        key: (statistics.median(s["on"]), statistics.median(s["off"]))
        for key, s in (("turn", turn), ("nested", nested), ("wall", wall), ("cpu", cpu))
    }
    emit(
        "19",
        compared="turn (ensure() + keeper.tab(conv)), tracing on vs off",
        ratios=ratios(turn),
        goal=1.05,
        direction="<=",
        detail=f"on {med['turn'][0]:.1f} µs, off {med['turn'][1]:.1f} µs (medians, "
        f"{args.calls} calls/round, SDK BatchSpanProcessor)",
    )
    emit(
        "19",
        compared="turn inside the caller's recording span (a child span each), on vs off",
        ratios=ratios(nested),
        goal=None,  # the SDK's own span, several untraced turns: reported (issue 49)
        direction="<=",
        detail=f"on {med['nested'][0]:.1f} µs, off {med['nested'][1]:.1f} µs (medians; "
        "a quiet turn outside any trace has no span)",
    )
    rtt = statistics.median(turn["rtt"])
    emit(
        "19",
        compared="turn in a caller's span, tracing on, vs one page.evaluate('1') (row 1)",
        ratios=[a / b for a, b in zip(nested["on"], turn["rtt"], strict=True)],
        goal=0.1,
        direction="<=",
        detail=f"turn in a caller's span {med['nested'][0]:.1f} µs, evaluate {rtt:.1f} µs "
        "(medians)",
    )
    emit(
        "19",
        compared=f"guarded page load ({args.subresources} subresources), tracing on vs off",
        ratios=ratios(wall),
        goal=1.05,
        direction="<=",
        detail=f"on {med['wall'][0]:.0f} ms, off {med['wall'][1]:.0f} ms (medians; "
        f"{2 * args.rounds} loads a side, rounds A B B A)",
    )
    emit(
        "19",
        compared=f"guarded page load ({args.subresources} subresources), tracing on vs off, "
        "CPU per load",
        ratios=ratios(cpu),
        goal=1.05,
        direction="<=",
        detail=f"on {med['cpu'][0]:.0f} ms, off {med['cpu'][1]:.0f} ms of CPU (medians; "
        "this process, the driver and Chromium)",
    )
    print(
        f"RESULT turn_on_us={med['turn'][0]:.1f} turn_off_us={med['turn'][1]:.1f} "
        f"turn_ratio={statistics.median(ratios(turn)):.3f} "
        f"nested_on_us={med['nested'][0]:.1f} nested_ratio={statistics.median(ratios(nested)):.3f} "
        f"load_on_ms={med['wall'][0]:.1f} load_off_ms={med['wall'][1]:.1f} "
        f"load_ratio={statistics.median(ratios(wall)):.3f} "
        f"cpu_ratio={statistics.median(ratios(cpu)):.3f} spans={spans}"
    )


if __name__ == "__main__":
    main()
