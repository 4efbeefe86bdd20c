"""A person approves a borrow in the console; the Guard lets exactly that one write through."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright

from session_keeper import Durability, Grant, Guard, PlaywrightBackend, SessionKeeper
from session_keeper.console import Console
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.testing import LocalSites

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(180)]

BILLING = "billing.example"
POST_CARD = (
    "fetch('/card', {method: 'POST', body: new URLSearchParams({card: '4000000000000002'})})"
    ".then(r => r.status)"
)


def card_writes(sites: LocalSites) -> int:
    """POST /card requests billing.example received (with its login cookie)."""
    return sum(
        1
        for r in sites.requests(BILLING)
        if r.method == "POST" and r.path == "/card" and r.cookie("billing_session")
    )


async def test_a_borrow_approved_in_the_console_lets_exactly_one_write_reach_the_site(
    tmp_path: Path, chromium_path: str, artifacts: Path
) -> None:
    """research asks to write once; the person approves uses=1 in the console; of two
    writes the server sees exactly one, and the approval names the person in the audit."""
    keyring = Keyring({"k1": secrets.token_bytes(32)})
    with LocalSites() as sites:
        backend = PlaywrightBackend(
            tmp_path / "profile",
            executable_path=chromium_path,
            host_resolver_rules=sites.host_resolver_rules,
        )
        try:
            async with SqliteStore(tmp_path / "keeper.db") as store:
                audit = AuditLog(store, keyring)
                keeper: SessionKeeper[Page] = SessionKeeper(
                    backend,
                    durability=Durability(store=store, keyring=keyring, audit=audit),
                    grants=[
                        Grant("billing", BILLING, actions={"read", "write"}),
                        Grant("research", BILLING, actions={"read"}),
                    ],
                )
                Guard(keeper, audit=audit)
                async with keeper:
                    await keeper.ensure("billing")
                    page = await keeper.unguarded_page("billing", sites.url(BILLING, "/login"))
                    await page.fill("input[name=username]", "alice")
                    await page.fill("input[name=password]", "correct horse")
                    async with page.expect_navigation():
                        await page.click("button[type=submit]")
                    await keeper.record_login("billing", BILLING, account="alice")

                    await keeper.ensure("research")
                    research = await keeper.unguarded_page(
                        "research", sites.url(BILLING, "/invoices")
                    )
                    await research.wait_for_selector("#invoices")
                    # Without the borrow the write is refused in the browser.
                    assert await research.evaluate(POST_CARD) == 403
                    assert card_writes(sites) == 0
                    request = keeper.request_borrow(
                        "research", BILLING, "write", reason="update the card on file"
                    )

                    console = Console(keeper, bind="127.0.0.1:0")
                    async with console, async_playwright() as pw:
                        browser = await pw.chromium.launch(executable_path=chromium_path)
                        try:
                            person = await browser.new_page()
                            await person.goto(console.login_link("dana"))
                            await person.goto(f"{console.url}/borrows")
                            row = person.locator(f"#borrow-{request.id}")
                            assert "update the card on file" in await row.inner_text()
                            await person.screenshot(path=str(artifacts / "borrows.png"))
                            await row.locator("input[name=uses]").fill("1")
                            await row.locator("input[name=expires_minutes]").fill("10")
                            await row.locator("button[value=approve]").click()
                            await person.wait_for_selector("#flash")
                            assert "approved by dana" in await person.inner_text("#flash")
                            await person.screenshot(path=str(artifacts / "approved.png"))
                        finally:
                            await browser.close()

                    await research.reload()
                    await research.wait_for_selector("#invoices")
                    first = await research.evaluate(POST_CARD)
                    second = await research.evaluate(POST_CARD)
                    assert (first, second) == (200, 403)
                    assert card_writes(sites) == 1
                    assert keeper.borrow_requests() == ()
                entries = await verify_audit(store, keyring, expected_head=audit.head)
                assert entries > 0
                approvals = [
                    e.data["body"]
                    for e in await store.events(kind="audit")
                    if e.data["type"] == "borrow_approved"
                ]
                assert len(approvals) == 1
                body = approvals[0]
                assert isinstance(body, dict)
                assert body["approved_by"] == "dana" and body["request"] == request.id
                assert body["uses"] == 1
        finally:
            await backend.aclose()
