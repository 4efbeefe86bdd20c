"""The README's quick start: sign in, act under a grant, survive a crash.

    python -m session_keeper.examples.quickstart            # the script types for the person
    python -m session_keeper.examples.quickstart --headed   # you sign in, in a real window

Runs against the package's own local test sites (``billing.example`` on 127.0.0.1, no
packet leaves the machine) on a throwaway profile.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile

from session_keeper import ConversationTab, Grant, Guard, PlaywrightBackend, SessionKeeper
from session_keeper.errors import NavigationBlocked
from session_keeper.testing import LocalSites

SITE = "billing.example"
USERNAME, PASSWORD = "ada", "correct horse battery"


async def person_signs_in(tab: ConversationTab, *, headed: bool) -> None:
    """The person signs in on the tab's sign-in page; the script never sees a password
    it did not type itself."""
    if headed:
        print(f"sign in as {USERNAME} / {PASSWORD} in the browser window (5 minutes)")
        await tab.wait_for(text="Invoices", timeout_ms=300_000)
        return
    await tab.fill("input[name=username]", USERNAME)  # what the person would type
    await tab.fill("input[name=password]", PASSWORD)
    await tab.click("button[type=submit]")
    await tab.wait_for(text="Invoices")


async def main(headed: bool = False) -> None:
    """Run the quick start once, printing what the keeper said at each step."""
    with (
        LocalSites(billing_accounts={USERNAME: PASSWORD}) as sites,
        tempfile.TemporaryDirectory(prefix="session-keeper-quickstart-") as profile,
    ):
        backend = PlaywrightBackend(
            profile, headless=not headed, host_resolver_rules=sites.host_resolver_rules
        )
        # The "billing" conversation may use billing.example's login (read and write).
        keeper = SessionKeeper(backend, grants=[Grant("billing", SITE)])
        Guard(keeper)  # enforce the grants on the network, inside the browser
        async with keeper:
            turn = await keeper.ensure("billing")  # at the start of every turn
            print(f"{turn.browser_id} restarted={turn.restarted}")
            decision = keeper.decide("billing", SITE, "read", assumes_login=True)
            print(f"decide: {decision.outcome}")  # need_login: nobody signed in yet

            # A sign-in: mark its start, the person signs in, record it on evidence.
            tab = await keeper.tab("billing", sites.url(SITE, "/login"))
            await keeper.begin_login("billing", SITE)
            await person_signs_in(tab, headed=headed)
            record = await keeper.record_login("billing", SITE, account=USERNAME)
            print(f"login recorded: {record.site} for {record.owner}")

            decision = keeper.decide("billing", SITE, "read", assumes_login=True)
            print(f"decide: {decision.outcome}")
            await tab.goto(sites.url(SITE, "/invoices"))
            print(f"billing reads: {await tab.title()}")

            # Another conversation has no grant: refused by decide() and by the Guard.
            await keeper.ensure("research")
            print(f"research decide: {keeper.decide('research', SITE, 'read').reason}")
            other = await keeper.tab("research")
            try:
                await other.goto(sites.url(SITE, "/invoices"))
            except NavigationBlocked as blocked:
                print(f"research navigation blocked: rule {blocked.block.rule}")

            # The browser dies under the agent; the next turn is told what it lost.
            session = backend.current
            assert session is not None
            await session.kill()  # a real SIGKILL of Chromium
            turn = await keeper.ensure("billing")
            lost = ", ".join(str(x) for x in turn.lost)
            print(f"{turn.browser_id} restarted={turn.restarted} lost {lost}")
            decision = keeper.decide("billing", SITE, "read", assumes_login=True)
            print(f"decide: {decision.outcome}")


def run(argv: list[str] | None = None) -> int:
    """The command line: ``--headed`` lets you do the sign-in yourself."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--headed", action="store_true", help="show the browser; you sign in")
    args = parser.parse_args(argv)
    asyncio.run(main(headed=args.headed))
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
