"""What the durable write intent costs a step's first write, side by side (SQLite).

A Temporal or DBOS browser step's ``step.write(...)`` records its intent to submit in the
keeper's Store before the submit, in the transaction that renews the profile's lease (the
fence every submit already paid for). This measures that write path with and without the
intent, interleaved in one run on one SqliteStore file (durable: fsynced commits): the
*intent* arm is ``BrowserStep.write`` as it is now (``KeeperPool.confirm_write``), the
*renewal* arm the same call whose fence only renews the lease (``confirm_lease``, the
write before the intent). Both are the first attempt of a fresh step (no read-back), on
a fake browser, with a submit that returns at once: nothing but the keeper's own work,
so the ratio is the worst case; a real submit (a page's POST) only dilutes it.

    RESULT intent_ms=... renewal_ms=... ratio_median=... rounds=N writes=M

Usage: ``python benchmarks/write_intent.py [--rounds 9] [--writes 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from session_keeper.integrations._steps import BrowserStep
from session_keeper.jobs import Readback
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend

CONVERSATION = "billing-agent"
URL = "https://billing.example/invoices"


async def _submit(page: Any, key: str) -> Mapping[str, object]:
    return {"refund_id": key}


async def _readback(page: Any, key: str) -> Readback:
    raise AssertionError("a fresh step's first write never reads back")


async def _arm(
    pool: KeeperPool[Any],
    name: str,
    writes: int,
    round_no: int,
    confirm: Callable[[str], Awaitable[bool]],
) -> float:
    """Milliseconds per write over ``writes`` fresh steps' first writes."""
    async with pool.hold(CONVERSATION) as keeper:
        facts = await keeper.ensure(CONVERSATION, turn=f"{name}-{round_no}")
        await keeper.unguarded_page(CONVERSATION, URL)
        started = time.perf_counter()
        for i in range(writes):
            step: BrowserStep[Any] = BrowserStep(
                keeper,
                facts,
                CONVERSATION,
                worker_id="bench",
                workflow_id=f"run-{name}-{round_no}",
                step_id=str(i),
                fresh=True,
                confirm_write=confirm,
            )
            await step.write("refund", _submit, _readback, url=URL)
        return (time.perf_counter() - started) * 1000 / writes


async def run(rounds: int, writes: int) -> tuple[list[float], list[float]]:
    """Per round, ms per write with the intent and with the renewal alone."""
    with_intent: list[float] = []
    renewal_only: list[float] = []
    with tempfile.TemporaryDirectory(prefix="write-intent-bench-") as tmp:
        async with (
            SqliteStore(str(Path(tmp) / "k.db")) as store,
            KeeperPool(
                {"p0": FakeBackend()},
                store=store,
                owner="bench",
                lease_ttl=timedelta(seconds=60),
            ) as pool,
        ):

            async def intent(idem: str) -> bool:
                return await pool.confirm_write(CONVERSATION, idem)

            async def renewal(idem: str) -> bool:
                await pool.confirm_lease(CONVERSATION)
                return True

            await pool.ensure(CONVERSATION)
            await _arm(pool, "warm", 20, 0, intent)
            for r in range(1, rounds + 1):
                # The arms' order alternates, so neither always runs on a warmer cache.
                arms = [("intent", intent), ("renewal", renewal)]
                if r % 2:
                    arms.reverse()
                for name, confirm in arms:
                    ms = await _arm(pool, name, writes, r, confirm)
                    (with_intent if name == "intent" else renewal_only).append(ms)
    return with_intent, renewal_only


def main() -> None:
    """Run the rounds and print each, then the RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--writes", type=int, default=200)
    args = parser.parse_args()
    with_intent, renewal_only = asyncio.run(run(args.rounds, args.writes))
    ratios = [a / b for a, b in zip(with_intent, renewal_only, strict=True)]
    for i, (a, b, q) in enumerate(zip(with_intent, renewal_only, ratios, strict=True), 1):
        print(f"round {i}: intent {a:.3f} ms/write, renewal {b:.3f} ms/write, ratio {q:.3f}")
    print(
        f"RESULT intent_ms={statistics.median(with_intent):.3f} "
        f"renewal_ms={statistics.median(renewal_only):.3f} "
        f"ratio_median={statistics.median(ratios):.3f} "
        f"ratio_min={min(ratios):.3f} ratio_max={max(ratios):.3f} "
        f"rounds={args.rounds} writes={args.writes}"
    )


if __name__ == "__main__":
    main()
