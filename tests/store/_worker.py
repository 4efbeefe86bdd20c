"""A separate OS process for crash and multi-process store tests.

Run as ``python tests/store/_worker.py '<json>'``, or call the functions in a forked
child (much faster than starting an interpreter). Modes:

- ``crash``: commit one page with a statement hook that kills this process
  (``os._exit`` or SIGKILL) just before hook call number ``crash_at``. The page's
  artifact is written by the commit itself (``artifact: "page"``, the job loop's way)
  or beforehand by ``put_artifact`` (``artifact: "put"``).
- ``labels``: commit one page and print the hook labels it passed, in order.
- ``drain``: claim ready jobs one after another until none is left, commit
  ``pages`` pages of ten records to each, release it; print the claimed job ids.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from collections.abc import Callable

from session_keeper.jobs import ArtifactRef, Lease, PageArtifact, ResultRecord
from session_keeper.stores import PostgresStore, SqliteStore, Store
from session_keeper.testing import FakeClock, watch_store_statements

#: Hooks ignore statements until the commit under test starts (put_artifact runs its
#: own transactions first).
ARMED = [False]
#: The bytes of page 2's artifact.
EVIDENCE = b"page-2 evidence"


def make_store(spec: dict[str, Any], hook: Callable[[str], None] | None = None) -> Store:
    """The store the spec names, on a FakeClock at its default start (shared by all
    processes), calling ``hook`` at every statement point (testing mode)."""
    store: SqliteStore | PostgresStore
    if spec["kind"] == "sqlite":
        store = SqliteStore(spec["location"], clock=FakeClock())
    else:
        store = PostgresStore(spec["location"], clock=FakeClock())
    watch_store_statements(store, hook)
    return store


def page(ids: list[str]) -> list[ResultRecord]:
    """Records for the given ids."""
    return [ResultRecord(source_record_id=i, data={"id": i}) for i in ids]


async def commit_once(spec: dict[str, Any], hook: Callable[[str], None]) -> None:
    """Commit page 2 of the job the parent prepared, through ``hook``."""
    lease = Lease(
        job_id=spec["job_id"],
        owner=spec["owner"],
        token=spec["token"],
        expires_at=FakeClock().now() + timedelta(hours=1),
    )
    ARMED[0] = False
    async with make_store(spec, hook) as store:
        artifact: ArtifactRef | PageArtifact
        if spec.get("artifact", "page") == "put":
            artifact = await store.put_artifact(EVIDENCE, name="results/page-2.json")
        else:
            artifact = PageArtifact(name="results/page-2.json", data=EVIDENCE)
        ARMED[0] = True
        await store.commit_page(
            lease, spec["revision"], page(spec["records"]), "page-3", "page-2", artifact=artifact
        )


def crash(spec: dict[str, Any]) -> None:
    """Die at the chosen statement point."""
    calls = 0
    target = int(spec["crash_at"])
    use_sigkill = bool(spec.get("sigkill"))

    def hook(label: str) -> None:
        nonlocal calls
        if not ARMED[0]:
            return
        if calls == target:
            sys.stdout.flush()
            if use_sigkill:
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(17)
        calls += 1

    asyncio.run(commit_once(spec, hook))
    sys.exit(3)  # crash_at was past the last point


def labels(spec: dict[str, Any]) -> list[str]:
    """The commit's hook labels, in order (also printed as JSON)."""
    seen: list[str] = []

    def hook(label: str) -> None:
        if ARMED[0]:
            seen.append(label)

    asyncio.run(commit_once(spec, hook))
    print(json.dumps(seen))
    return seen


async def drain(spec: dict[str, Any]) -> list[str]:
    """Claim and finish jobs until none is claimable; print and return what it claimed."""
    claimed: list[str] = []
    async with make_store(spec) as store:
        while True:
            lease = await store.claim_next_ready(spec["owner"], timedelta(hours=1))
            if lease is None:
                break
            claimed.append(lease.job_id)
            checkpoint = await store.transition(lease, 0, "running")
            revision = checkpoint.checkpoint_revision
            for n in range(spec["pages"]):
                ids = [f"{lease.job_id}-{n}-{i}" for i in range(10)]
                result = await store.commit_page(lease, revision, page(ids), f"p{n + 1}", f"p{n}")
                revision = result.checkpoint.checkpoint_revision
            await store.transition(lease, revision, "done")
            await store.release(lease)
    print(json.dumps(claimed))
    return claimed


def drain_in_child(spec: dict[str, Any]) -> None:
    """Entry point for a forked child: run :func:`drain`, write what it claimed to ``out``."""
    claimed = asyncio.run(drain(spec))
    Path(spec["out"]).write_text(json.dumps(claimed))


def main() -> None:
    """Dispatch on the spec's mode."""
    spec = json.loads(sys.argv[1])
    if spec["mode"] == "crash":
        crash(spec)
    elif spec["mode"] == "labels":
        labels(spec)
    else:
        asyncio.run(drain(spec))


if __name__ == "__main__":
    main()
