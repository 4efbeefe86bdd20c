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

Each row's counting, its ``FAULT_REPORT`` record and its assertions live here once
(:func:`walk_row`, :func:`write_row`, :func:`lease_row`); a test file runs the fault on
its engine and asserts what only that engine shows. A row records before it asserts,
so a failing trial is in the report too.
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

#: Pages of a walk: at least 20 fault points in each walk row's space.
PAGES = 24
#: Refunds of the write-outcome-unknown row, one per step.
REFUNDS = 10
#: The profile lease in the stalled-worker rows: long enough that a loaded machine's
#: event-loop lag never fences a worker that did not stall.
LEASE_MS = 8000
#: The lease rows' fault points: where the worker stalls (before a refund's page or its
#: submit) and for how long (1 to 3 s past the lease).
STALL_SPACE = [
    (where, ms)
    for where in ("page", "write")
    for ms in range(LEASE_MS + 1000, LEASE_MS + 3000, 100)
]
#: The write rows' fault points: which refund, and whether its answer or its request is lost.
WRITE_SPACE = [(i, how) for i in range(REFUNDS) for how in ("answer", "request")]


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


def refund_steps(step: str, url: str, point: tuple[int, str]) -> list[list[Any]]:
    """The write row's ``REFUNDS`` refunds as ``step`` steps on billing's ``url``; refund
    ``i`` of ``point`` (``(i, how)``) loses its answer (``how="answer"``) or its request."""
    at, how = point
    steps: list[list[Any]] = []
    for i in range(REFUNDS):
        arg: dict[str, Any] = {"url": url, "amount": f"{i + 1}.00"}
        if i == at:
            arg["lose_answer" if how == "answer" else "lose_request"] = True
        steps.append([step, arg])
    return steps


def stall_arg(url: str, tmp_path: Path, point: tuple[str, int]) -> dict[str, Any]:
    """The lease row's refund on billing's ``url``: its worker stalls ``ms`` of ``point``
    (``(where, ms)``) once, before the page or the write (``stall_once``)."""
    where, ms = point
    arg: dict[str, Any] = {"url": url, "amount": "3.00", "stall_s": ms / 1000}
    arg.update(stall_at=where, stall_mark=str(tmp_path / "stalled"))
    return arg


def walk_row(
    engine: str,
    fault: str,
    out: Mapping[str, Any],
    *,
    read: list[int],
    seen: list[int],
    lost: str,
    recover_s: float,
    **more: Any,
) -> dict[str, int]:
    """A walk row's trial: pages lost, duplicated and re-read (``walk_counts`` of the
    steps' ``read`` against the site's ``seen``), the steps told ``lost``; recorded, then
    asserted: nothing lost or duplicated, one step told. Returns the counts."""
    counts = walk_counts(read, seen, PAGES)
    told = told_count(out["facts"], lost)
    report(engine, fault, **counts, told=told, stale_writes=0, recover_s=recover_s, **more)
    assert counts["lost"] == 0 and counts["duplicated"] == 0, (counts, out)
    assert told == 1, out["facts"]
    return counts


def write_row(
    engine: str,
    out: Mapping[str, Any],
    *,
    sites: DemoSites,
    host: str,
    prefix: str,
    made: int,
    point: tuple[int, str],
    recover_s: float,
    keys: Iterable[str] | None = None,
    **more: Any,
) -> None:
    """A write row's trial (:func:`refund_steps` at ``point``): refunds never posted under
    the run's idempotency keys (``prefix``; each of ``keys`` where the engine's keys are
    known) or missing from the steps' results, and posts or refunds (``made``) beyond
    one per key; recorded, then asserted: none lost or duplicated, the faulted refund
    read back after a lost answer and submitted after a lost request."""
    at, how = point
    posts = refund_posts(sites, host, prefix)
    missing = REFUNDS - len(posts) if keys is None else sum(posts[k] == 0 for k in keys)
    counts = {
        "lost": missing + sum("refund_id" not in v for v in out["values"]),
        "duplicated": sum(max(0, n - 1) for n in posts.values()) + max(0, made - REFUNDS),
        "re_read": 0,
    }
    done = out["values"][at]["how"]
    report(
        engine, "write_unknown", **counts, told=None, stale_writes=0, recover_s=recover_s,
        how=done, **more,
    )  # fmt: skip
    assert counts == {"lost": 0, "duplicated": 0, "re_read": 0}, (posts, out["values"])
    assert made == REFUNDS
    assert done == ("readback" if how == "answer" else "submitted")


def lease_row(
    engine: str,
    out: Mapping[str, Any],
    *,
    thief: Thief,
    sites: DemoSites,
    host: str,
    prefix: str,
    made: int,
    lost: str,
    asked: list[float],
    **more: Any,
) -> None:
    """A lease row's trial (:func:`stall_arg`): refund POSTs under ``prefix`` billing got
    while the thief held the lease (stale writes), the refund never made or made or
    posted more than once, the steps told ``lost``; recorded, then asserted: no stale
    write, nothing lost or duplicated, at most one step told."""
    stale = thief.stale_posts(sites, prefix)
    posts = sum(refund_posts(sites, host, prefix).values())
    counts = {"lost": int(made == 0), "duplicated": max(0, made - 1) + max(0, posts - 1)}
    told = told_count(out["facts"], lost)
    report(
        engine, "lease_stolen", **counts, re_read=0, told=told, stale_writes=stale,
        recover_s=None, sign_ins=len(asked), **more,
    )  # fmt: skip
    assert stale == 0, f"a {engine} worker that lost its lease wrote to billing"
    assert counts == {"lost": 0, "duplicated": 0}, (counts, out["values"])
    assert told <= 1, out["facts"]
