"""A worker process SIGKILLed at every store statement boundary of a whole job run.

A forked child opens the store, signs the job in, submits and runs the 5-page audit;
the store's testing mode (``watch_store_statements``) calls a hook before every
statement, before ``COMMIT`` and after it, and the child kills itself with SIGKILL at
hook call N. The parent then recovers as a replacement worker would (the dead lease
expires, the human signs in again if the login went with the browser, the job runs
on) and the independent validator checks the store against the catalogue's truth.

``make chaos`` kills at every boundary of the run (in a seeded random order); CI at a
few (``FAULT_TRIALS``). Every boundary of one page (from page 1's commit to page 2's)
is killed at every time: none may leave an artifact without its checkpoint, or a
checkpoint naming a missing artifact. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from session_keeper.errors import JobNotFound
from session_keeper.stores import PostgresStore, SqliteStore
from session_keeper.testing import FakeClock, TemporaryPostgres, watch_store_statements
from tests._chaos import TRIALS, sample
from tests.store._helpers import stored_artifacts

from .conftest import PAGES, FakeCatalogue, contract, identity, make_world, target
from .test_faults import validate

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(900)]

_FORK = multiprocessing.get_context("fork")
#: Every boundary under ``make chaos`` (``FAULT_ALL_BOUNDARIES=1``), a sample in CI.
ALL = os.environ.get("FAULT_ALL_BOUNDARIES") == "1"


def open_store(spec: dict[str, Any], clock: FakeClock) -> SqliteStore | PostgresStore:
    """The spec's store on ``clock``."""
    if spec["kind"] == "sqlite":
        return SqliteStore(spec["location"], clock=clock)
    return PostgresStore(spec["location"], clock=clock)


async def _work(spec: dict[str, Any]) -> None:
    calls = 0
    kill_at = spec.get("kill_at")
    out = Path(spec["out"])
    labels: list[str] = []

    def hook(label: str) -> None:
        nonlocal calls
        if kill_at is not None and calls == kill_at:
            out.write_text(json.dumps({"label": label, "calls": calls}))
            os.kill(os.getpid(), signal.SIGKILL)
        labels.append(label)
        calls += 1

    clock = FakeClock()
    store = open_store(spec, clock)
    watch_store_statements(store, hook)
    async with make_world(store, clock, Path(spec["location"]), spec["kind"]) as world:
        await world.sign_in()
        await world.loop("w1").submit(contract())
        await world.loop("w1").run(
            "audit", FakeCatalogue().step, target=target, expect_identity=identity
        )
    done = {"label": None, "calls": calls, "labels": labels}
    out.write_text(json.dumps(done))  # noqa: ASYNC240 - the child's last act


def work(spec: dict[str, Any]) -> None:
    """The forked worker: run the job, die at hook call ``kill_at`` (if any)."""
    asyncio.run(_work(spec))


def run_child(spec: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
    """Fork a worker for ``spec``; its exit code and what it wrote."""
    child = _FORK.Process(target=work, args=(spec,))
    child.start()
    child.join(120)
    if child.exitcode is None:  # pragma: no cover - a hung worker fails the trial
        child.kill()
        child.join()
    return child.exitcode, json.loads(Path(spec["out"]).read_text())


async def recover(spec: dict[str, Any], killed_at: str | None, index: int) -> None:
    """A replacement worker finishes the job; the validator checks the store."""
    clock = FakeClock()
    clock.advance(timedelta(seconds=31))  # the dead worker's 30 s lease has run out
    store = open_store(spec, clock)
    async with make_world(store, clock, Path(spec["location"]), spec["kind"]) as world:
        world.fault_at = spec["killed_t"]
        await world.sign_in()
        loop = world.loop("w2")
        try:
            await world.store.load_job("audit")
        except JobNotFound:
            await loop.submit(contract())  # killed before the submission committed
        c = FakeCatalogue()
        out = await loop.run("audit", c.step, target=target, expect_identity=identity)
        for _ in range(3):
            if out.state != "awaiting_human":
                break
            await world.sign_in()
            await loop.resume("audit", decided_by="operator")
            out = await loop.run("audit", c.step, target=target, expect_identity=identity)
        v = await validate(world, out.state, c, pages=PAGES, killed_at=killed_at, statement=index)
        assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
            0, 0, 0, False, "done",
        ), f"killed at statement {index} ({killed_at})"  # fmt: skip


def boundaries(spec: dict[str, Any]) -> int:
    """How many hook calls a whole run makes (a run with no kill)."""
    return len(reference_labels(spec))


def reference_labels(spec: dict[str, Any]) -> list[str]:
    """The hook labels of a whole run with no kill, in order."""
    code, wrote = run_child(spec)
    assert code == 0, f"the reference run exited {code}"
    labels = [str(x) for x in wrote["labels"]]
    assert len(labels) == wrote["calls"]
    return labels


def second_page(labels: list[str]) -> range:
    """The hook calls from just after page 1's commit returned to page 2's ``COMMITTED``."""
    # A page commit is the transaction that inserts results; it ends at its COMMITTED.
    ends = [
        labels.index("COMMITTED", start)
        for start, label in enumerate(labels)
        if label == "insert_results"
    ]
    assert len(ends) == PAGES, labels
    return range(ends[0] + 1, ends[1] + 1)


async def artifacts_match_checkpoints(spec: dict[str, Any], index: int) -> None:
    """Every stored artifact is named by a committed page, and every committed page's
    artifact is stored (referenced)."""
    async with open_store(spec, FakeClock()) as store:
        commits = await store.events(job_id="audit", kind="page_committed")
        named = sorted({str(e.artifact) for e in commits})
        assert await stored_artifacts(store) == [(d, True) for d in named], (
            f"killed at statement {index}"
        )


def kill_through_a_page(tmp_path: Path, kind: str, fresh: Any) -> None:
    """Kill a worker at every boundary of page 2 (fresh store each); check its artifacts."""
    labels = reference_labels(
        {"kind": kind, "location": fresh("ref"), "out": str(tmp_path / "ref")}
    )
    window = second_page(labels)
    killed = 0
    for n in window:
        spec = {"kind": kind, "location": fresh(f"p{n}"), "out": str(tmp_path / f"page{n}")}
        code, _ = run_child({**spec, "kill_at": n})
        assert code in (-signal.SIGKILL, 0), f"worker exited {code} at statement {n}"
        killed += code == -signal.SIGKILL
        asyncio.run(artifacts_match_checkpoints(spec, n))
    assert killed == len(window)


def kill_everywhere(tmp_path: Path, kind: str, fresh: Any) -> None:
    """Kill a worker at each chosen boundary (fresh store each), recover, validate."""
    total = boundaries({"kind": kind, "location": fresh("ref"), "out": str(tmp_path / "ref")})
    assert total > 20
    chosen = sample(f"stmt-{kind}", range(total), total if ALL else TRIALS)
    killed = 0
    for n in chosen:
        spec = {"kind": kind, "location": fresh(f"k{n}"), "out": str(tmp_path / f"out{n}")}
        code, wrote = run_child({**spec, "kill_at": n})
        spec["killed_t"] = time.perf_counter()
        # The background writer can batch differently from the reference run, so the
        # last few points may be past this run's end: then it finished, not died.
        assert code in (-signal.SIGKILL, 0), f"worker exited {code} at statement {n}"
        killed += code == -signal.SIGKILL
        asyncio.run(recover(spec, wrote["label"], n))
    assert killed >= len(chosen) - 3


def test_a_worker_killed_at_every_sqlite_statement_boundary_loses_nothing(
    tmp_path: Path,
) -> None:
    """SIGKILL before any statement or commit of a run: nothing lost, nothing twice."""
    kill_everywhere(tmp_path, "sqlite", lambda name: str(tmp_path / f"{name}.db"))


@pytest.mark.postgres
def test_a_worker_killed_at_every_postgres_statement_boundary_loses_nothing(
    tmp_path: Path, pg_server: TemporaryPostgres
) -> None:
    """The same on PostgreSQL: a fresh database per kill point."""
    prefix = f"sk_kill_{os.getpid()}"
    kill_everywhere(
        tmp_path, "postgres", lambda name: pg_server.create_database(f"{prefix}_{name}")
    )


def test_a_worker_killed_anywhere_in_a_page_leaves_no_artifact_without_its_checkpoint(
    tmp_path: Path,
) -> None:
    """SIGKILL at each SQLite boundary of a page: its artifact is stored iff its commit is."""
    kill_through_a_page(tmp_path, "sqlite", lambda name: str(tmp_path / f"{name}.db"))


@pytest.mark.postgres
def test_a_postgres_worker_killed_anywhere_in_a_page_leaves_no_artifact_without_its_checkpoint(
    tmp_path: Path, pg_server: TemporaryPostgres
) -> None:
    """The same on PostgreSQL: a fresh database per kill point."""
    prefix = f"sk_page_{os.getpid()}"
    kill_through_a_page(
        tmp_path, "postgres", lambda name: pg_server.create_database(f"{prefix}_{name}")
    )
