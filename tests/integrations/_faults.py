"""What the durable engines' fault rows share, whichever engine runs the steps.

The Temporal rows (``test_temporal_faults.py``) and the DBOS rows (``test_dbos_faults.py``,
``test_dbos_recovery.py``) count the same things against the test sites' own logs and
append them to ``FAULT_REPORT`` as ``row="engine"`` records, which
``scripts/write_reliability.py`` tallies into RELIABILITY.md's "Durable engines" table:

- **lost**: pages of a walk never read (or missing from the steps' results), refunds
  never made;
- **duplicated**: pages the result holds twice, refunds a key got more than once or
  submitted again after one reached the site;
- **told**: how many steps' facts named what the fault took (1 is "told once");
- **stale writes**: requests a worker sent after its profile's lease was taken.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from demos.sites import DemoSites
from session_keeper.errors import ProfileHeld
from session_keeper.stores import SqliteStore
from tests._chaos import SEED, record


def ids(points: Iterable[Any]) -> list[str]:
    """Trial ids that carry the seed and the fault point."""
    return [f"seed{SEED}-{p}" for p in points]


def report(engine: str, fault: str, **counts: Any) -> None:
    """One trial's counts: printed (shown on failure) and appended to ``FAULT_REPORT``."""
    print(f"seed={SEED} {engine} {fault}: {counts}")
    record("engine", engine=engine, fault=fault, **counts)


def served(sites: DemoSites, host: str, tag: str) -> list[int]:
    """The pages of walk ``tag`` that ``host`` served, in order (the site's own log)."""
    out = []
    for r in sites.requests(host):
        query = parse_qs(r.query)
        if query.get("walk") == [tag] and "page" in query:
            out.append(int(query["page"][0]))
    return out


def walk_counts(read: list[int], seen: list[int], pages: int) -> dict[str, int]:
    """Lost and duplicated pages of a walk of ``pages``: what the steps returned (``read``)
    against what the site served (``seen``)."""
    every = set(range(pages))
    return {
        "lost": len(every - set(read)) + len(every - set(seen)),
        "duplicated": len(read) - len(set(read)),
        "re_read": len(seen) - len(set(seen)),
    }


def told_count(facts: Iterable[Mapping[str, Any]], lost: str) -> int:
    """How many steps' facts named ``lost`` (``kind:name``) among what they lost."""
    return sum(any(f"{x['kind']}:{x['name']}" == lost for x in f["lost"]) for f in facts)


def refund_posts(sites: DemoSites, host: str, prefix: str) -> Counter[str]:
    """The refund POSTs ``host`` received per idempotency key starting with ``prefix``."""
    return Counter(
        key
        for r in sites.requests(host)
        if r.method == "POST" and r.path == "/refund"
        for key in parse_qs(r.query).get("idempotency_key", [])
        if key.startswith(prefix)
    )


async def until(check: Callable[[], Any], what: str, within: float = 60) -> None:
    """Wait (polling) until ``check()`` is truthy, ``within`` seconds at most."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.02)


def stall_once(arg: Mapping[str, Any]) -> None:
    """Stall the whole process ``arg["stall_s"]`` seconds (a blocking sleep: no lease
    renewal, no heartbeat, as in a long GC pause or a frozen VM), the first time only
    (across retries and re-runs: ``arg["stall_mark"]`` is a file made when it stalls)."""
    mark = Path(arg["stall_mark"])
    if mark.exists():
        return
    mark.touch()
    time.sleep(float(arg["stall_s"]))


class Thief:
    """Another holder (a thread with its own store connection) that takes profile ``p0``'s
    lease as soon as it lapses, holds it ``hold_s``, then gives it back; it notes how many
    requests ``host`` had logged at both moments."""

    def __init__(self, db: Path, sites: DemoSites, host: str, hold_s: float) -> None:
        self.stolen_at: int | None = None
        self.released_at: int | None = None
        self._db, self._sites, self._host, self._hold = db, sites, host, hold_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def __enter__(self) -> Thief:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    async def _run(self) -> None:
        async with SqliteStore(self._db) as store:
            while not self._stop.is_set():
                try:
                    lease = await store.acquire_profile("p0", "thief", timedelta(seconds=30))
                except ProfileHeld:
                    await asyncio.sleep(0.05)
                    continue
                self.stolen_at = len(self._sites.requests(self._host))
                await asyncio.sleep(self._hold)
                self.released_at = len(self._sites.requests(self._host))
                await store.release_profile(lease)
                return

    def stale_posts(self, sites: DemoSites, prefix: str) -> int:
        """Refund POSTs under idempotency keys starting with ``prefix`` that the host
        received while the thief held the lease (it must have taken it)."""
        assert self.stolen_at is not None and self.released_at is not None, "never stolen"
        held = sites.requests(self._host)[self.stolen_at : self.released_at]
        return sum(
            r.method == "POST"
            and r.path == "/refund"
            and any(k.startswith(prefix) for k in parse_qs(r.query).get("idempotency_key", []))
            for r in held
        )
