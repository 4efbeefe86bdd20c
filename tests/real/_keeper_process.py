"""A keeper process for the kill test: signs in, opens tabs, says READY, then waits to die."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from session_keeper import Durability, Grant, LoginSettings, PlaywrightBackend, SessionKeeper
from session_keeper.stores import SqliteStore

KEY = bytes(range(32))


async def main(db: str, profile: str, rules: str, billing_url: str, docs_url: str) -> None:
    """Run until killed."""
    async with SqliteStore(Path(db)) as store:
        keeper = SessionKeeper(
            PlaywrightBackend(profile, host_resolver_rules=rules),
            durability=Durability(store=store),
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
        await keeper.unguarded_page("billing", billing_url + "/invoices")
        await keeper.ensure("research")
        await keeper.unguarded_page("research", docs_url + "/guide")
        await keeper.persist()
        print("READY", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
