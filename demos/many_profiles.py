"""Many profiles, one open browser: a KeeperPool on real Chromium (or ``--fake``).

    python demos/many_profiles.py [--fake]

Two accounts, one Chromium profile each, at most one browser open. Each chat turn
goes to its account's profile; opening the other profile closes this one as an idle
sweep would, and its conversation is told on its next turn, once. Profile leases live
in a SQLite store (PostgreSQL for many machines: same code, ``PostgresStore``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from session_keeper import PlaywrightBackend, find_chromium
from session_keeper.pool import KeeperPool, SiteRouting
from session_keeper.seams import BrowserBackend
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend


async def main(fake: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="many-profiles-") as tmp:
        profiles: dict[str, BrowserBackend[Any]] = {
            name: FakeBackend()
            if fake
            else PlaywrightBackend(Path(tmp) / name, executable_path=find_chromium())
            for name in ("ana", "bo")
        }
        async with (
            SqliteStore(Path(tmp) / "agent.db") as store,
            KeeperPool(
                profiles,
                store=store,
                owner="laptop",
                policy=SiteRouting(accounts={"ana@billing": "ana", "bo@billing": "bo"}),
                max_open=1,
            ) as pool,
        ):
            for chat, account in [("chat-ana", "ana@billing"), ("chat-bo", "bo@billing")] * 2:
                turn = await pool.ensure(chat, account=account)
                await pool.tab(chat, "about:blank")
                lost = ", ".join(map(str, turn.lost)) or "nothing"
                print(
                    f"{chat}: profile {pool.profile_of(chat)}, {turn.browser_id}, "
                    f"restarted={turn.restarted}, lost {lost}"
                )
            print(f"open now: {', '.join(pool.stats().open_profiles)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fake", action="store_true", help="fake browsers, no Chromium")
    asyncio.run(main(parser.parse_args().fake))
