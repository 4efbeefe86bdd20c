"""A keeper process on a CDP browser: signs in, opens two tabs, says READY, waits to die.

It prints ``READY {"billing": <target id>, "research": <target id>}`` once its state
is saved, so the test can SIGKILL it and check what a new process re-binds to.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from session_keeper import CdpBackend, Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.stores import SqliteStore

KEY = bytes(range(32))


async def main(
    db: str, endpoint: str, billing_url: str, docs_url: str, keeper_id: str = "default"
) -> None:
    """Run until killed."""
    backend = CdpBackend(endpoint)
    async with SqliteStore(Path(db)) as store:
        keeper = SessionKeeper(
            backend,
            durability=Durability(store=store, keeper_id=keeper_id),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=[Grant("billing", "billing.example")],
        )
        await keeper.ensure("billing")
        page = await keeper.unguarded_page("billing", billing_url + "/login")
        await page.fill("input[name=username]", "alice")
        await page.fill("input[name=password]", "correct horse")
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        await keeper.record_login("billing", "billing.example", account="alice")
        billing = await keeper.unguarded_page("billing", billing_url + "/invoices")
        await keeper.ensure("research")
        research = await keeper.unguarded_page("research", docs_url + "/guide")
        await keeper.persist()
        session = backend.current
        assert session is not None
        targets = {"billing": session.target_id(billing), "research": session.target_id(research)}
        print("READY " + json.dumps(targets), flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
