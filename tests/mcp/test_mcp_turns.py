"""Turns, access requests and elicitation of the MCP server, with the official in-process client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from playwright.async_api import Page

from session_keeper import Grant, Guard, PlaywrightBackend, SessionKeeper
from session_keeper.mcp import KeeperMCP
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import call, ref, restart, sign_in_billing, structured, text, with_login

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(180),
]


@asynccontextmanager
async def served(
    make: BackendFactory, elicit: ElicitationFnT | None = None, **server: Any
) -> AsyncIterator[tuple[SessionKeeper[Page], Client]]:
    """A keeper (billing owns billing.example) with its Guard, served to one client
    (``server``: more KeeperMCP options)."""
    keeper: SessionKeeper[Page] = SessionKeeper(
        make(), grants=[Grant("billing", "billing.example")]
    )
    Guard(keeper)
    app = KeeperMCP(keeper, **server)
    async with keeper, Client(app.server, elicitation_callback=elicit) as client:
        yield keeper, client


async def _kill(keeper: SessionKeeper[Page], make: BackendFactory) -> None:
    """SIGKILL the keeper's Chromium: the live session of the keeper's backend."""
    backend = keeper.backend
    assert isinstance(backend, PlaywrightBackend)
    session = backend.current
    assert session is not None
    await session.kill()


async def test_a_retried_turn_is_told_the_same_facts_and_the_next_turn_is_not(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Retries carrying one turn id all see the restart facts; a new turn does not."""
    async with served(playwright_backend) as (keeper, client):
        docs = sites.url("docs.example", "/")
        first = await call(client, "browser_navigate", {"url": docs}, conversation="a", turn="t1")
        assert not first.is_error, text(first)
        await _kill(keeper, playwright_backend)
        told = await call(client, "browser_status", conversation="a", turn="t2")
        retried = await call(client, "browser_snapshot", conversation="a", turn="t2")
        facts = restart(told)
        assert facts is not None and facts["restarted"] is True
        assert restart(retried) == facts
        assert text(retried).startswith("### Browser restart")
        assert restart(await call(client, "browser_status", conversation="a", turn="t3")) is None
        assert restart(await call(client, "browser_status", conversation="a", turn="t2")) is None
        assert restart(await call(client, "browser_status", conversation="a")) is None


async def test_without_elicitation_access_stays_pending_until_the_application_approves(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """No elicitation: a pending request grants nothing until answer_borrow approves it."""
    async with served(playwright_backend) as (keeper, client):
        await sign_in_billing(client, sites, conversation="billing")
        invoices = sites.url("billing.example", "/invoices")
        asked = await call(
            client, "browser_request_access", {"site": "billing.example"}, conversation="support"
        )
        request = structured(asked)["request"]
        assert not asked.is_error and request["status"] == "pending"
        assert "pending" in text(asked)
        # Also for clients that hand the model only structuredContent (Pydantic AI's).
        assert structured(asked)["message"] == text(asked)
        mark = len(sites.requests("billing.example"))
        refused = await call(client, "browser_navigate", {"url": invoices}, conversation="support")
        assert refused.is_error and "signed in by billing" in text(refused)
        assert with_login(sites, mark) == 0
        status = structured(await call(client, "browser_status", conversation="support"))
        assert [r["id"] for r in status["pending_requests"]] == [request["id"]]

        keeper.answer_borrow(request["id"], approve=True, by="ops on call")
        used = await call(client, "browser_navigate", {"url": invoices}, conversation="support")
        assert not used.is_error, text(used)
        assert with_login(sites, mark) == 1


async def test_the_requesters_own_client_is_never_asked_and_facts_still_reach_it(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A client that approves anything asks for access: pending, never asked, told of the kill."""
    asked: list[str] = []

    async def yes_to_anything(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True, "approver": "erin"})

    async with served(playwright_backend, yes_to_anything) as (keeper, client):
        assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
        await sign_in_billing(client, sites, conversation="billing")
        await call(client, "browser_navigate", {"url": sites.url("docs.example", "/")},
                   conversation="support")  # fmt: skip
        await _kill(keeper, playwright_backend)
        result = await call(
            client, "browser_request_access", {"site": "billing.example", "action": "read"},
            conversation="support",
        )  # fmt: skip
        assert asked == []
        facts: dict[str, Any] | None = restart(result)
        assert facts is not None and facts["restarted"] is True
        assert structured(result)["request"]["status"] == "pending"
        assert structured(result)["owner_asked"] is False
        assert [r.status for r in keeper.borrow_requests(status=None)] == ["pending"]
        assert not any(g.conversation == "support" for g in keeper.grants())
        assert restart(await call(client, "browser_status", conversation="support")) is None


async def test_a_sixth_pending_access_request_is_refused_and_files_nothing(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Five requests may wait at once; the sixth is a TooManyPendingRequests tool error."""
    async with served(playwright_backend) as (keeper, client):
        for i in range(5):
            asked = await call(client, "browser_request_access", {"site": f"s{i}.example"},
                               conversation="support")  # fmt: skip
            assert not asked.is_error, text(asked)
        sixth = await call(client, "browser_request_access", {"site": "s5.example"},
                           conversation="support")  # fmt: skip
        assert sixth.is_error and "TooManyPendingRequests" in text(sixth)
        assert len(keeper.borrow_requests()) == 5


async def test_a_call_the_browser_dies_under_answers_with_the_restart(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A SIGKILL in the middle of a tool call is answered with the turn's restart facts and
    a browser_replaced error, never a bare BrowserGoneError with no facts."""
    async with served(playwright_backend) as (keeper, client):
        docs = sites.url("docs.example", "/")
        assert not (
            await call(client, "browser_navigate", {"url": docs}, conversation="a")
        ).is_error
        waiting = asyncio.create_task(
            call(client, "browser_wait_for", {"text": "never on this page"}, conversation="a")
        )
        # Well inside the tool by then (its ensure() saw a live browser), far from its timeout.
        await asyncio.sleep(1.0)
        assert not waiting.done()
        await _kill(keeper, playwright_backend)
        result = await waiting
        assert result.is_error
        facts = restart(result)
        assert facts is not None and facts["restarted"] is True, text(result)
        data = structured(result)
        assert data["error"] == "browser_replaced"
        assert "went away during browser_wait_for" in data["message"]
        assert data["restart_notice"].startswith("### Browser restart")


async def test_an_errors_message_is_in_its_structured_content(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Every tool error carries its words in structuredContent as well as the text (under
    Playwright MCP's "### Error" heading), for clients that hand the model only
    structuredContent."""
    async with served(playwright_backend) as (_keeper, client):
        failures = [
            await call(client, "browser_navigate", {"url": "file:///etc/passwd"}, conversation="a"),
            await call(client, "browser_wait_for", {}, conversation="a"),
            await call(client, "browser_navigate", {}, conversation="a"),
            await call(client, "no_such_tool", {}, conversation="a"),
        ]
        for result in failures:
            assert result.is_error
            data = structured(result)
            assert data["error"] and text(result) == f"### Error\n{data['message']}", data


async def test_recording_a_login_the_conversation_may_not_use_says_so_at_once(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A login recorded by a conversation without a grant for the site is answered with
    what to change (the server's --grant), not left for the first refused page."""
    async with served(playwright_backend) as (_keeper, client):
        recorded = await sign_in_billing(client, sites, conversation="a")
        assert structured(recorded)["usable"] is False
        assert "has no grant for billing.example" in text(recorded)
        assert "--grant billing.example" in text(recorded)
        assert structured(recorded)["message"] == text(recorded)
        mine = await sign_in_billing(client, sites, conversation="billing")
        assert structured(mine)["usable"] is True and "Note" not in text(mine)


async def test_a_person_signs_in_through_the_link_the_model_hands_them(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """browser_request_sign_in gives a one-time link to the conversation's live view; the
    person signs in there, on a sign-in page of the keeper's (the password never passes
    through the model, the client or the model's tab) and presses Done; the login is the
    conversation's, its tab is moved to the signed-in page, and its pages load signed in."""
    import re

    import httpx

    from session_keeper.console import Console

    keeper: SessionKeeper[Page] = SessionKeeper(
        playwright_backend(), grants=[Grant("billing", "billing.example")]
    )
    Guard(keeper)
    async with keeper:
        console = Console(keeper, bind="127.0.0.1:0")
        async with console, Client(KeeperMCP(keeper, sign_in=console).server) as client:
            login = sites.url("billing.example", "/login")
            asked = await call(
                client, "browser_request_sign_in",
                {"site": "billing.example", "url": login}, conversation="billing",
            )  # fmt: skip
            assert not asked.is_error, text(asked)
            link = structured(asked)["link"]
            assert "Never ask them for the password" in structured(asked)["message"]
            assert link.startswith(console.url + "/login?code=")
            # The person: opens the link, types into the tab (what the live view streams),
            # presses Done with the form's CSRF token.
            async with httpx.AsyncClient(base_url=console.url, follow_redirects=True) as person:
                live = await person.get(link.removeprefix(console.url))
                assert live.status_code == 200
                csrf = re.search(r'name="csrf" value="([^"]+)"', live.text)
                exp = re.search(r'name="exp" value="([^"]+)"', live.text)
                sig = re.search(r'name="sig" value="([^"]+)"', live.text)
                assert csrf and exp and sig
                # The link opened a sign-in page of the keeper's at the url asked for;
                # the model's tab never went there.
                (page,) = keeper.unguarded_sign_in_pages("billing")
                assert page.url == login and keeper.current_url("billing") != login
                await page.fill("input[name=username]", "alice")
                await page.fill("input[name=password]", "correct horse")
                async with page.expect_navigation():
                    await page.click("button[type=submit]")
                done = await person.post(
                    "/live/billing/done",
                    data={"csrf": csrf[1], "exp": exp[1], "sig": sig[1],
                          "site": "billing.example", "account": "alice"},
                )  # fmt: skip
                assert done.status_code == 200 and "recorded" in done.text
            assert keeper.unguarded_sign_in_pages("billing") == ()
            assert keeper.current_url("billing") == sites.url("billing.example", "/invoices")
            assert "correct horse" not in text(asked)
            status = structured(await call(client, "browser_logins", conversation="billing"))
            assert [(r["site"], r["mine"]) for r in status["logins"]] == [("billing.example", True)]
            invoices = await call(
                client, "browser_navigate",
                {"url": sites.url("billing.example", "/invoices")}, conversation="billing",
            )  # fmt: skip
            assert not invoices.is_error and "Invoices" in text(invoices)


async def test_without_a_console_the_sign_in_tool_says_how_to_get_one(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """With no console to hand a person the tab, the tool says so (and not to ask for a
    password) instead of leaving the model to type the credentials."""
    async with served(playwright_backend) as (_keeper, client):
        result = await call(
            client, "browser_request_sign_in", {"site": "billing.example"}, conversation="a"
        )
        assert result.is_error and "--console" in text(result)
        assert structured(result)["error"] == "no_console"


async def test_a_submit_that_navigates_answers_with_the_page_it_led_to(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """browser_type(submit=True) answers with the loaded page's title, and that page is
    the tab's verified URL: a restart then names where the tab really was."""
    async with served(playwright_backend) as (keeper, client):
        login = sites.url("billing.example", "/login")
        page = await call(client, "browser_navigate", {"url": login}, conversation="billing")
        snap = structured(page)["snapshot"]
        user, pw = ref(snap, "textbox", "Username"), ref(snap, "textbox", "Password")
        await call(client, "browser_type", {"target": user, "text": "alice"},
                   conversation="billing")  # fmt: skip
        sent = await call(client, "browser_type",
                          {"target": pw, "text": "correct horse", "submit": True},
                          conversation="billing")  # fmt: skip
        invoices = sites.url("billing.example", "/invoices")
        assert structured(sent)["url"] == invoices
        assert structured(sent)["title"], text(sent)
        await _kill(keeper, playwright_backend)
        told = None
        for _ in range(200):  # the keeper hears of the death from the browser's events
            told = restart(await call(client, "browser_status", conversation="billing"))
            if told is not None:
                break
        assert told is not None
        tabs = [x for x in told["lost"] if x["kind"] == "tab"]
        assert [t["last_url"] for t in tabs] == [invoices]
