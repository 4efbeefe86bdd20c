"""Our own process dies (SIGKILL): a new process continues from the store."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.stores import SqliteStore
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

KEY = bytes(range(32))
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(240)  # above the 120 s wait for READY, which names what hung
async def test_killed_keeper_process_is_picked_up_by_a_new_one(
    tmp_path: Path, sites: LocalSites, playwright_backend: BackendFactory
) -> None:
    """After SIGKILL of the keeper's process, a new one numbers on and reports every loss."""
    db, profile = tmp_path / "keeper.db", tmp_path / "profile"
    billing = sites.url("billing.example", "").rstrip("/")
    docs = sites.url("docs.example", "").rstrip("/")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "tests" / "real" / "_keeper_process.py"),
        str(db),
        str(profile),
        sites.host_resolver_rules,
        billing,
        docs,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
    assert line.strip() == b"READY"
    proc.send_signal(signal.SIGKILL)
    await proc.wait()

    async with SqliteStore(db) as store:
        keeper = SessionKeeper(
            playwright_backend(profile),
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=[Grant("billing", "billing.example")],
        )
        async with keeper:
            turn = await keeper.ensure("billing")
            assert turn.restarted and turn.generation == 2 and turn.previous_generation == 1
            assert [str(x) for x in turn.lost] == ["login:billing.example", "tab:billing"]
            assert turn.lost_tab is not None
            assert turn.lost_tab.last_url == billing + "/invoices"
            research = await keeper.ensure("research")
            assert research.lost_tab is not None
            assert research.lost_tab.last_url == docs + "/guide"
            decision = keeper.decide("billing", "billing.example", "write", assumes_login=True)
            assert decision.outcome == "stop"
            assert not (await keeper.ensure("billing")).restarted
