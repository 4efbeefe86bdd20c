"""Disk full under SQLite: a real, small tmpfs fills up in the middle of a job.

The store lives on its own tmpfs (``mount -t tmpfs -o size=...``; root only, so the
test skips elsewhere and says why). After page ``at`` is committed a filler file takes
all but ``free`` bytes, so a later write fails with SQLITE_FULL wherever it falls. Then
space comes back (the filler is deleted), a replacement worker runs the job on, and
the validator checks: nothing lost, nothing twice, never done early.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from session_keeper.errors import SessionKeeperError, UnsavedChanges
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeClock
from tests._chaos import sample

from .conftest import FakeCatalogue, contract, identity, make_world, target, truth
from .test_faults import PAGES, validate

pytestmark = pytest.mark.chaos

#: The tmpfs: room for the job's database and its WAL, small enough to fill quickly.
SIZE = 8 * 1024 * 1024


@contextlib.contextmanager
def tmpfs(path: Path) -> Iterator[Path]:
    """A fresh tmpfs of SIZE bytes at ``path``; skips when it cannot be mounted."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """Take all but ``leave`` bytes of the file system at ``disk``."""
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    filler = disk / "filler"
    with filler.open("wb") as f, contextlib.suppress(OSError):
        f.write(b"\0" * max(0, free - leave))
    return filler


FILLS = sample("disk", [(at, leave) for at in range(1, PAGES) for leave in range(0, 65536, 4096)])


@pytest.mark.parametrize("point", FILLS, ids=[f"{at}-{leave}" for at, leave in FILLS])
async def test_disk_full_under_sqlite(tmp_path: Path, point: tuple[int, int]) -> None:
    """A full disk fails a write with a typed store error; with space back, the job
    finishes with every record once and was never marked done early."""
    at, leave = point
    with tmpfs(tmp_path / "disk") as disk:
        clock = FakeClock()
        path = disk / "jobs.db"
        async with make_world(SqliteStore(path, clock=clock), clock, path, "sqlite") as world:
            await world.sign_in()
            await world.loop().submit(contract())
            c = FakeCatalogue(pages=PAGES)
            fillers: list[Path] = []

            async def fill_disk() -> None:
                if c.calls == at and not fillers:
                    world.fault_at = time.perf_counter()
                    fillers.append(fill(disk, leave))

            failed: BaseException | None = None
            try:
                out = await world.loop("w1", fault_hooks={"after_commit": fill_disk}).run(
                    "audit", c.step, target=target, expect_identity=identity
                )
            except SessionKeeperError as exc:  # the typed failure a full disk must give
                failed = exc
            if failed is None:
                # Small writes may still fit: the job may even finish on the last pages.
                assert out.state in ("done", "running", "ready"), out
            cp_state_before = (await world.store.load_checkpoint("audit")).state
            if cp_state_before == "done" and failed is not None:
                # The job's last commit landed, then a later write (the keeper's own state)
                # met the full disk: done is not early only if every record is in.
                stored = {r.source_record_id for r in await world.store.results("audit")}
                assert stored == set(truth(PAGES)), "marked done before every record"
            fillers[0].unlink()
            clock.advance(timedelta(seconds=31))  # a lease left behind runs out
            # With space back, the operator writes what the keeper kept unsaved: the first
            # call reports the write that failed on the full disk (once), the next saves.
            for attempt in range(2):
                try:
                    await world.keeper.persist()
                    break
                except UnsavedChanges:
                    assert attempt == 0, "space is back: the second persist() must write"
            out = await world.loop("w2").run(
                "audit", c.step, target=target, expect_identity=identity
            )
            if out.state == "awaiting_human":
                await world.sign_in()
                await world.loop("w2").resume("audit", decided_by="operator")
                out = await world.loop("w2").run(
                    "audit", c.step, target=target, expect_identity=identity
                )
            v = await validate(world, out.state, c, medium="tmpfs", error=type(failed).__name__)
            assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
                0, 0, 0, False, "done",
            )  # fmt: skip
