"""What the per-step engine benchmarks share (``temporal_step.py``, ``dbos_step.py``): the
one loopback page the arms load, the bare arms' browsers and their work, the floor arm's
store, the rounds with the arms' order rotating, and the BENCH records with the RESULT line.

Four arms run on the same engine:

- *integration*: the keeper's browser step;
- *bare*: the same Playwright work in a plain activity / step, on a browser that keeps
  its profile on disk (``launch_persistent_context``, as the keeper's does: a browser
  that keeps logins between turns writes its profile as it browses);
- *floor*: the bare work plus the one durable commit per step the integration cannot
  skip. A step's turn is recorded in the store before the step is told its facts (so a
  retry is told the same ones, and a fact is never told twice): one SQLite commit,
  fsynced, on the same disk;
- *no profile*: the same work on a browser that keeps nothing (``browser.new_page()``,
  a throwaway context). Not a peer (it cannot keep a login past its process), but what
  a profile on disk costs is shown beside the rest: measured 2026-12-07, the keeper's
  navigation on its profile was 0.99× the same navigation on a bare persistent context,
  which was itself 1.05-1.13× a throwaway context's.

The integration is held to ≤ 1.10× of *bare* and of *floor*.
"""

from __future__ import annotations

import contextlib
import http.server
import statistics
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from playwright.async_api import Page, async_playwright

from benchmarks._report import emit
from session_keeper import find_chromium
from session_keeper._browser.chromium import CHROMIUM_ARGS
from session_keeper.stores import SqliteStore
from session_keeper.testing import StoreOperation, StoreStatement, run_store_operation

#: Runs one workflow of ``n`` steps of one arm; returns ms per step.
Timed = Callable[[int], Awaitable[float]]


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>step</title><p>one page</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def one_page() -> Iterator[str]:
    """The URL of one small page served on loopback while the block runs."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


class Bare:
    """The bare arms' pages (each in its own Chromium, launched once) and the floor arm's
    store."""

    #: The bare and floor arms' page, in a browser keeping its profile on disk.
    page: Page | None = None
    #: The no-profile arm's page, in a throwaway context.
    no_profile: Page | None = None
    store: SqliteStore | None = None


@contextlib.asynccontextmanager
async def bare_browser(workdir: Path) -> AsyncIterator[None]:
    """Launch the bare arms' Chromiums (the build the keeper finds, its flags) and open the
    floor arm's store, all under ``workdir``, for the block."""
    async with async_playwright() as pw, SqliteStore(workdir / "floor.db") as store:
        chromium = find_chromium()
        context = await pw.chromium.launch_persistent_context(
            workdir / "bare-profile", executable_path=chromium, args=CHROMIUM_ARGS
        )
        throwaway = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            Bare.page = context.pages[0] if context.pages else await context.new_page()
            Bare.no_profile = await throwaway.new_page()
            Bare.store = store
            yield
        finally:
            Bare.page = Bare.no_profile = Bare.store = None
            await throwaway.close()
            await context.close()


async def _work(page: Page | None, url: str) -> int:
    assert page is not None
    await page.goto(url)
    answer: int = await page.evaluate("1 + 1")
    return answer


async def bare_work(url: str) -> int:
    """The bare arm's step: the same goto + evaluate with nothing around it."""
    return await _work(Bare.page, url)


async def no_profile_work(url: str) -> int:
    """The no-profile arm's step: the bare work in a browser that keeps nothing."""
    return await _work(Bare.no_profile, url)


def _turn_record() -> StoreOperation[None]:
    yield StoreStatement(
        "floor_commit",
        "INSERT INTO keeper_heads (keeper_id, body, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (keeper_id) DO UPDATE SET body = excluded.body, "
        "updated_at = excluded.updated_at",
        ("floor", '{"turn": "t"}', datetime.now(UTC)),
        answer="none",
    )


async def floor_work(url: str) -> int:
    """The floor arm's step: the bare work, then one durable commit (a turn's record)."""
    assert Bare.store is not None
    answer = await bare_work(url)
    await run_store_operation(Bare.store, _turn_record)
    return answer


async def rotate(arms: Mapping[str, Timed], rounds: int, steps: int) -> dict[str, list[float]]:
    """A warm-up of each arm, then ``rounds`` rounds of ``steps`` steps, the arms' order
    rotating between rounds (each arm goes first as often). Per-round ms per step, by arm."""
    names = list(arms)
    out: dict[str, list[float]] = {name: [] for name in names}
    for name in names:
        await arms[name](2)  # warm-up: the launch, the first connections
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            out[name].append(await arms[name](steps))
    return out


def report(row: str, compared: str, ms: Mapping[str, list[float]], said: str) -> None:
    """Emit row ``row``'s BENCH records (integration vs bare and vs the floor, goals
    ≤ 1.10×; vs no profile, no goal) and print the RESULT line, ``said`` appended."""
    kept, bare, floor, none = ms["integration"], ms["bare"], ms["floor"], ms["no_profile"]

    def per_round(a: list[float], b: list[float]) -> list[float]:
        return [x / y for x, y in zip(a, b, strict=True)]

    ratios, to_floor, to_none = per_round(kept, bare), per_round(kept, floor), per_round(kept, none)
    profile = statistics.median(per_round(bare, none))
    k, b, f, n = (statistics.median(x) for x in (kept, bare, floor, none))
    engine = compared.split(":")[0]
    emit(
        row,
        compared=compared,
        ratios=ratios,
        goal=1.10,
        direction="<=",
        detail=f"integration {k:.1f} ms, bare {b:.1f} ms, floor {f:.1f} ms per step (medians; "
        "both browsers keep a profile on disk)",
    )
    emit(
        row,
        compared=f"{engine}: integration vs bare + one durable commit (floor)",
        ratios=to_floor,
        goal=1.10,
        direction="<=",
        detail=f"the floor is {f / b:.2f}x bare (one fsynced SQLite commit per step)",
    )
    emit(
        row,
        compared=f"{engine}: integration vs the bare work on a browser keeping no profile",
        ratios=to_none,
        goal=None,
        direction="<=",
        detail=f"no profile {n:.1f} ms per step; the profile on disk alone costs the bare "
        f"work {profile:.2f}x (bare vs no profile, same rounds)",
    )
    print(
        f"RESULT integration_ms={k:.1f} bare_ms={b:.1f} floor_ms={f:.1f} no_profile_ms={n:.1f} "
        f"ratio={statistics.median(ratios):.2f} to_floor={statistics.median(to_floor):.2f} "
        f"to_no_profile={statistics.median(to_none):.2f} profile_cost={profile:.2f} {said}"
    )
