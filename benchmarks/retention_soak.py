"""Row 25: the event log stays bounded under a long soak of turns with retention on.

    python benchmarks/retention_soak.py [--turns 100000] [--conversations 100]

Two keepers side by side (FakeBackend, each on its own SQLite store, audit on), fed the
same turns in blocks of 1,000, alternately: each turn is a durable ``ensure(conv,
turn=<new id>)`` and a counted ``decide()`` (one audit entry), the turns 8.64 s apart on
a FakeClock (100,000 turns are ten days). Each keeper persists every 10 turns, as its
background writer batches them. One keeper runs retention after every block (the event
log older than a day: :meth:`Store.prune_events`, then :meth:`AuditLog.archive`); the
other never does.

Every 10,000 turns both logs are counted (rows of ``events``). The ``BENCH`` row is the
retention keeper's count at each later sample over its count at 20,000 turns (one day
and more in: the window is full), goal ≤ 1.1× (bounded); a second row gives the same
for the keeper without retention (no goal: it grows with the turns). At the end each
audit chain is verified in full (:func:`verify_audit`), the archived one from its mark.
The ``RESULT`` line gives the final counts, the verified chain lengths and the median
retention pass.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore, Store
from session_keeper.testing import FakeBackend, FakeClock, FakePage

SITE = "billing.example"
TURN = timedelta(seconds=8.64)
WINDOW = timedelta(days=1)
BLOCK = 1000
SAMPLE = 10_000


class Soaked:
    """One keeper on its own store, and whether it runs retention."""

    def __init__(
        self,
        keeper: SessionKeeper[FakePage],
        store: Store,
        audit: AuditLog,
        keyring: Keyring,
        *,
        retention: bool,
    ) -> None:
        self.keeper, self.store, self.audit, self.keyring = keeper, store, audit, keyring
        self.retention = retention
        self.counts: dict[int, int] = {}
        self.passes: list[float] = []

    async def block(self, first: int, conversations: int) -> None:
        """Turns ``first`` .. ``first + BLOCK - 1``, then retention (if on)."""
        keeper = self.keeper
        for t in range(first, first + BLOCK):
            conversation = f"c{t % conversations}"
            await keeper.ensure(conversation, turn=f"t{t}")
            keeper.decide(conversation, SITE, "read")
            if t % 10 == 9:
                await keeper.persist()
        await keeper.persist()
        if self.retention:
            start = time.perf_counter()
            await self.store.prune_events(older_than=WINDOW)
            await self.audit.archive(older_than=WINDOW)
            self.passes.append(time.perf_counter() - start)

    async def count(self, turns: int) -> None:
        """The event log's rows after ``turns`` turns."""
        total = 0
        since: int | None = None
        while page := await self.store.events(since_id=since, limit=1000):
            total += len(page)
            since = page[-1].id
        self.counts[turns] = total


async def _keeper(
    stack: AsyncExitStack, path: Path, clock: FakeClock, conversations: int, retention: bool
) -> Soaked:
    store = await stack.enter_async_context(SqliteStore(path, clock=clock))
    keyring = Keyring([("k1", b"r" * 32)])
    audit = AuditLog(store, keyring, clock=clock)
    backend = FakeBackend(clock=clock)
    keeper: SessionKeeper[FakePage] = SessionKeeper(
        backend,
        clock=clock,
        durability=Durability(store=store, audit=audit),
        login_settings=LoginSettings(fingerprint_key=bytes(32)),
        grants=[Grant(f"c{i}", SITE, actions={"read"}) for i in range(conversations)],
    )
    await stack.enter_async_context(keeper)
    await keeper.ensure("c0")
    await backend.sign_in(SITE, persistent=True)
    await keeper.record_login("c0", SITE)
    await keeper.persist()
    return Soaked(keeper, store, audit, keyring, retention=retention)


async def run(turns: int, conversations: int) -> tuple[Soaked, Soaked]:
    """Both keepers through ``turns`` turns; ``(with retention, without)``."""
    clock = FakeClock()
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        async with AsyncExitStack() as stack:
            kept = await _keeper(stack, Path(tmp) / "on.db", clock, conversations, True)
            grown = await _keeper(stack, Path(tmp) / "off.db", clock, conversations, False)
            for first in range(0, turns, BLOCK):
                order = (kept, grown) if (first // BLOCK) % 2 == 0 else (grown, kept)
                for soaked in order:
                    await soaked.block(first, conversations)
                # Both keepers' turns of this block happened in the same span of time.
                clock.advance(TURN * BLOCK)
                done = first + BLOCK
                if done % SAMPLE == 0:
                    for soaked in (kept, grown):
                        await soaked.count(done)
                    print(
                        f"{done:,} turns: events {kept.counts[done]:,} with retention, "
                        f"{grown.counts[done]:,} without",
                        flush=True,
                    )
            for soaked in (kept, grown):
                soaked.counts[-1] = await verify_audit(
                    soaked.store, soaked.keyring, expected_head=soaked.audit.head
                )
    return kept, grown


def main() -> None:
    """Run the soak, emit row 25 and print the RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--conversations", type=int, default=100)
    args = parser.parse_args()
    if args.turns < 3 * SAMPLE:
        parser.error(f"--turns must be at least {3 * SAMPLE:,} (the window fills by 20,000)")
    kept, grown = asyncio.run(run(args.turns, args.conversations))
    base = 2 * SAMPLE
    later = [n for n in sorted(kept.counts) if n > base]
    for soaked, label, goal in (
        (kept, "retention on (events older than a day pruned, audit archived)", 1.1),
        (grown, "retention off", None),
    ):
        counts = soaked.counts
        emit(
            "25",
            compared=f"event log rows after 30,000–{args.turns:,} turns vs after 20,000, " + label,
            ratios=[counts[n] / counts[base] for n in later],
            goal=goal,
            direction="<=",
            detail=", ".join(f"{n:,}: {counts[n]:,}" for n in sorted(counts) if n > 0)
            + f" rows; audit chain verified in full: {counts[-1]:,} entries",
        )
    passes = kept.passes
    print(
        f"RESULT events_with_retention={kept.counts[args.turns]} "
        f"events_without={grown.counts[args.turns]} verified_with={kept.counts[-1]} "
        f"verified_without={grown.counts[-1]} "
        f"retention_pass_ms_median={statistics.median(passes) * 1e3:.1f} "
        f"max={max(passes) * 1e3:.1f}"
    )


if __name__ == "__main__":
    main()
