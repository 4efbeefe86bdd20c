"""A pool records its conversations when given a Replay: each profile's keeper into a
sub-directory of its own, on real Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from session_keeper import Replay
from session_keeper.errors import InvalidArgumentType
from session_keeper.pool import KeeperPool, PinnedRouting
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, LocalSites

from ..conftest import BackendFactory


@pytest.mark.chromium
async def test_a_pools_conversations_are_recorded_per_profile_when_it_is_given_a_replay(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """Two conversations on two profiles, each act a frame: each profile's keeper
    records its own conversation, under ``profile-<name>``, readable from its keeper."""
    backends = {"p0": playwright_backend(), "p1": playwright_backend()}
    async with SqliteStore(tmp_path / "pool.db") as store:
        pool = KeeperPool(
            backends,
            store=store,
            owner="pool-a",
            policy=PinnedRouting({"billing": "p0", "docs": "p1"}),
            replay=Replay(directory=tmp_path / "replay"),
        )
        async with pool:
            for conversation, site in (("billing", "billing.example"), ("docs", "docs.example")):
                await pool.ensure(conversation)
                tab = await pool.tab(conversation)
                await tab.goto(sites.url(site, "/"))
            recorded = {}
            for conversation in ("billing", "docs"):
                recorder = pool.keeper(conversation).replay
                assert recorder is not None
                recorded[conversation] = [f.act for f in await recorder.frames(conversation)]
    assert recorded == {"billing": ["goto"], "docs": ["goto"]}
    for profile in ("p0", "p1"):
        assert list((tmp_path / "replay" / f"profile-{profile}").rglob("*.html")), profile


async def test_a_pool_refuses_a_replay_that_is_not_one(tmp_path: Path) -> None:
    """``replay=`` takes a Replay: anything else is refused before a profile opens."""
    async with SqliteStore(tmp_path / "pool.db") as store:
        with pytest.raises(InvalidArgumentType, match="replay must be a Replay"):
            KeeperPool(
                {"p0": FakeBackend()},
                store=store,
                owner="pool-a",
                replay=str(tmp_path),  # type: ignore[arg-type]
            )
