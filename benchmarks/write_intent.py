"""What the durable write intent costs a step's first write, side by side (SQLite).

A Temporal or DBOS browser step's ``step.write(...)`` records its intent to submit in
the keeper's Store before the submit, in the transaction that renews the profile's lease
(the fence every submit already paid for). This measures that write path with and
without the intent, interleaved write by write in one run on one SqliteStore file
(durable: fsynced commits): the *intent* arm is ``BrowserStep.write`` as it is now
(``KeeperPool.confirm_write``), the *renewal* arm the same call whose fence only renews
the lease (``confirm_lease``, the write before the intent). Both are the first attempt
of a fresh step (no read-back), on a fake browser, with a submit that returns at once:
nothing but the keeper's own work, so the ratio is the worst case; a real submit (a
page's POST) only dilutes it.

    BENCH {"row": "31", ...}
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

from benchmarks._report import emit
from session_keeper.integrations._steps import BrowserStep
from session_keeper.jobs import Readback
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend

CONVERSATION = "billing-agent"
#: A step's fence: records the intent (or only renews the lease); says whether first.
Confirm = Callable[[str], Awaitable[bool]]
URL = "https://billing.example/invoices"


async def _submit(page: Any, key: str) -> Mapping[str, object]:
    return {"refund_id": key}


async def _readback(page: Any, key: str) -> Readback:
    raise AssertionError("a fresh step's first write never reads back")


def _step(
    keeper: Any, facts: Any, name: str, round_no: int, i: int, confirm: Confirm
) -> BrowserStep[Any]:
    """A fresh step (the first attempt of its first dispatch) of its own workflow."""
    return BrowserStep(
        keeper,
        facts,
        CONVERSATION,
        worker_id="bench",
        workflow_id=f"run-{name}-{round_no}",
        step_id=str(i),
        fresh=True,
        confirm_write=confirm,
    )


async def run(rounds: int, writes: int) -> tuple[list[float], list[float]]:
    """Per round, the median ms of a write with the intent and with the renewal alone.

    The arms alternate write by write (their order flipping each time), so a burst of
    load on the shared machine lands on both: each round's medians are side by side.
    """
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

            async with pool.hold(CONVERSATION) as keeper:
                facts = await keeper.ensure(CONVERSATION)
                await keeper.unguarded_page(CONVERSATION, URL)
                arms: list[tuple[str, Confirm]] = [("intent", intent), ("renewal", renewal)]
                for r in range(rounds + 1):  # round 0 warms up, unrecorded
                    times: dict[str, list[float]] = {"intent": [], "renewal": []}
                    for i in range(writes):
                        arms.reverse()
                        for name, confirm in arms:
                            step = _step(keeper, facts, name, r, i, confirm)
                            started = time.perf_counter()
                            await step.write("refund", _submit, _readback, url=URL)
                            times[name].append((time.perf_counter() - started) * 1000)
                    if r:
                        with_intent.append(statistics.median(times["intent"]))
                        renewal_only.append(statistics.median(times["renewal"]))
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
        print(f"round {i}: intent {a:.3f} ms, renewal {b:.3f} ms (medians), ratio {q:.3f}")
    emit(
        "31",
        compared="a step's first write (SQLite): the durable write intent vs the lease renewal"
        " alone",
        ratios=ratios,
        goal=None,
        direction="<=",
        detail=f"intent {statistics.median(with_intent):.3f} ms, renewal"
        f" {statistics.median(renewal_only):.3f} ms per write (medians of {args.writes} writes"
        " a round); nothing but the keeper's own work: a real submit only dilutes it",
    )
    print(
        f"RESULT intent_ms={statistics.median(with_intent):.3f} "
        f"renewal_ms={statistics.median(renewal_only):.3f} "
        f"ratio_median={statistics.median(ratios):.3f} "
        f"ratio_min={min(ratios):.3f} ratio_max={max(ratios):.3f} "
        f"rounds={args.rounds} writes={args.writes}"
    )


if __name__ == "__main__":
    main()
