"""A pool in its own OS process, for the multi-process profile-lease tests.

Run as ``python tests/pool/_pool_process.py <mode> <dsn> <owner> [args]``. Modes:

- ``race <turns>``: a pool over profiles p0..p3 (fake browsers, max_open=2) takes
  ``turns`` turns on random conversations; each turn holds its profile for a moment,
  saves the keeper (fenced), then gives the profile back. A profile another process
  holds (ProfileHeld) is counted and tried again later. Prints ``DONE <json>``.
- ``hold <ttl_s>``: opens profile p0, prints ``HELD <token>``, then saves the keeper
  every 50 ms (fenced) until a save is refused (``REFUSED <error class>``) or the
  pool's renewal found the lease lost and closed the keeper (``FENCED``).
- ``freeze <ttl_s>``: as ``hold``, but the process stops itself (SIGSTOP) in the middle
  of a fenced save: the profile's row locked, the keeper's head sent, the COMMIT not,
  so the server waits on this client holding the lock. Prints ``FROZEN`` just before.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import contextlib

from session_keeper import Grant
from session_keeper.errors import KeeperClosedError, ProfileHeld, ProfileLeaseLost, UnsavedChanges
from session_keeper.pool import KeeperPool, PinnedRouting, SpreadRouting
from session_keeper.stores import PostgresStore
from session_keeper.testing import FakeBackend, watch_store_statements

PROFILES = ("p0", "p1", "p2", "p3")


async def race(dsn: str, owner: str, turns: int) -> None:
    rng = random.Random(owner)
    held_elsewhere = 0
    used: dict[str, int] = dict.fromkeys(PROFILES, 0)
    async with PostgresStore(dsn) as store:
        backends = {p: FakeBackend() for p in PROFILES}
        async with KeeperPool(
            backends,
            store=store,
            owner=owner,
            policy=SpreadRouting(),
            max_open=2,
            lease_ttl=timedelta(seconds=10),
        ) as pool:
            done = 0
            while done < turns:
                conversation = f"c{rng.randrange(12)}"
                try:
                    async with pool.hold(conversation) as keeper:
                        await keeper.ensure(conversation)
                        profile = pool.profile_of(conversation)
                        assert profile is not None
                        await asyncio.sleep(rng.uniform(0.005, 0.02))
                        keeper.grant(Grant(conversation, f"{owner}.example"))
                        await keeper.persist()  # fenced by the profile's lease
                except ProfileHeld:
                    held_elsewhere += 1
                    await asyncio.sleep(rng.uniform(0.001, 0.01))
                    continue
                used[profile] += 1
                await pool.close_profile(profile)
                done += 1
    print("DONE " + json.dumps({"held_elsewhere": held_elsewhere, "used": used}), flush=True)


def freeze_mid_save(label: str, sent: list[str]) -> None:
    """A statement hook: SIGSTOP this process before the COMMIT of a save whose head
    went out (the lease row locked and no Sync sent since)."""
    sent.append(label)
    if label == "COMMIT" and "upsert_keeper_head" in sent:
        print("FROZEN", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    if label in ("COMMIT", "COMMITTED"):
        sent.clear()


async def hold(dsn: str, owner: str, ttl_s: float, *, freeze: bool = False) -> None:
    async with PostgresStore(dsn) as store:
        pool = KeeperPool(
            {"p0": FakeBackend()},
            store=store,
            owner=owner,
            policy=PinnedRouting({"c": "p0"}),
            max_open=1,
            lease_ttl=timedelta(seconds=ttl_s),
        )
        async with pool:
            await pool.ensure("c")
            lease = await store.profile_lease("p0")
            assert lease is not None
            print(f"HELD {lease.token}", flush=True)
            if freeze:
                sent: list[str] = []
                watch_store_statements(store, lambda label: freeze_mid_save(label, sent))
            keeper = pool.keeper("c")
            n = 0
            while True:
                n += 1
                try:
                    keeper.grant(Grant("c", f"site{n}.example"))
                    await keeper.persist()
                except (UnsavedChanges, ProfileLeaseLost) as exc:
                    print(f"REFUSED {type(exc).__name__} after {n} saves", flush=True)
                    break
                except KeeperClosedError:
                    # The pool's renewal found the lease lost first and closed the keeper.
                    print(f"FENCED after {n} saves", flush=True)
                    break
                await asyncio.sleep(0.05)
            # The pool closes (and may fail to save): the refusal is what we report.
            with contextlib.suppress(UnsavedChanges, ProfileLeaseLost):
                await pool.aclose()


def main() -> None:
    mode, dsn, owner, *rest = sys.argv[1:]
    if mode == "race":
        asyncio.run(race(dsn, owner, int(rest[0])))
    elif mode == "hold":
        asyncio.run(hold(dsn, owner, float(rest[0])))
    elif mode == "freeze":
        asyncio.run(hold(dsn, owner, float(rest[0]), freeze=True))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
