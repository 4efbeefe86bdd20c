"""A restart takes more than URLs: typed, unsubmitted form input and unsaved downloads are
named in the lost list (field and file names, never a value), on real Chromium."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from session_keeper import LoginSettings, SessionKeeper
from session_keeper.testing import FakeClock, LocalSites

from ..conftest import BackendFactory, shared_driver_backend, sigkill

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

KEY = bytes(range(32))
CANARY = "canary-typed-value-7f3a9c"
BILLING = "billing.example"


def keeper_on(backend: Any) -> SessionKeeper[Page]:
    """A keeper on ``backend`` with a fake clock and a stable fingerprint key."""
    return SessionKeeper(
        backend, clock=FakeClock(), login_settings=LoginSettings(fingerprint_key=KEY)
    )


async def test_typed_but_unsubmitted_input_is_named_lost_by_a_restart_and_its_value_nowhere(
    playwright_backend: BackendFactory, sites: LocalSites, caplog: pytest.LogCaptureFixture
) -> None:
    """The agent filled two fields of a sign-in form and did not submit: after a SIGKILL
    the turn names both fields (input:username, input:password) and no form of the facts,
    nor any log line, holds the typed value."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    backend = playwright_backend()
    async with keeper_on(backend) as keeper:
        await keeper.ensure("billing")
        tab = await keeper.tab("billing", sites.url(BILLING, "/login"))
        await tab.fill("input[name=username]", CANARY)
        await tab.fill("input[name=password]", CANARY)
        await sigkill(backend.current)
        turn = await keeper.ensure("billing")
    assert turn.restarted
    assert [str(x) for x in turn.lost_input] == ["input:username", "input:password"]
    assert all(x.last_url == sites.url(BILLING, "/login") for x in turn.lost_input)
    told = [repr(turn), json.dumps(turn.to_dict()), turn.to_prompt(), caplog.text]
    assert not any(CANARY in text for text in told)
    assert "Lost what was typed into 'username'" in turn.to_prompt()


async def test_typed_input_is_counted_by_the_time_the_act_returns(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A fill is counted when it returns, so a crash the next moment still names it: 40
    fills alternating typed and cleared, each looked at with no await in between (the
    page's report of a field travels apart from the act's answer and can come later)."""
    backend = playwright_backend()
    async with keeper_on(backend) as keeper:
        await keeper.ensure("billing")
        tab = await keeper.tab("billing", sites.url(BILLING, "/login"))
        session = backend.current
        assert session is not None
        late = []
        for i in range(40):
            typed = i % 2 == 0
            await tab.fill("input[name=password]", CANARY if typed else "")
            seen = [x.field for x in session.unsubmitted_input("billing")]
            if seen != (["password"] if typed else []):
                late.append(i)
    assert late == []


async def test_submitted_or_cleared_input_is_not_reported_lost(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A form the agent submitted (its page navigated) and a field typed then cleared back
    to its default leave nothing to report; the tab alone is lost."""
    backend = playwright_backend()
    async with keeper_on(backend) as keeper:
        await keeper.ensure("billing")
        tab = await keeper.tab("billing", sites.url(BILLING, "/login"))
        await tab.fill("input[name=username]", "alice")
        await tab.fill("input[name=password]", "correct horse")
        await tab.click("button[type=submit]")
        await tab.settle()
        tab = await keeper.tab("billing", sites.url(BILLING, "/login"))
        await tab.fill("input[name=username]", "typed")
        await tab.fill("input[name=username]", "")
        await sigkill(backend.current)
        turn = await keeper.ensure("billing")
    assert turn.lost_input == ()
    assert [x.kind for x in turn.lost] == ["tab"]


async def test_input_a_person_typed_in_another_conversation_is_told_to_that_conversation(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Keystrokes on the page (as a person's in the live view) count as typed input, and
    each conversation hears only of its own fields."""
    backend = playwright_backend()
    async with keeper_on(backend) as keeper:
        await keeper.ensure("billing")
        await keeper.ensure("docs")
        await keeper.tab("docs", sites.url("docs.example", "/"))
        page = await keeper.unguarded_page("billing", sites.url(BILLING, "/login"))
        await page.click("input[name=username]")
        await page.keyboard.type("alice")
        await sigkill(backend.current)
        billing = await keeper.ensure("billing")
        docs = await keeper.ensure("docs")
    assert [str(x) for x in billing.lost_input] == ["input:username"]
    assert docs.lost_input == () and docs.lost_tab is not None


DOWNLOAD_JS = """([name, text]) => {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], {type: 'text/csv'}));
  a.download = name;
  document.body.appendChild(a);
  a.click();
}"""


async def test_an_unsaved_download_is_named_lost_and_a_saved_one_is_kept(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """Two downloads: the one save_downloads() saved is on disk with its content and not
    reported; the one that came after it is named lost (download:<file>) by the SIGKILL."""
    backend = playwright_backend()
    async with keeper_on(backend) as keeper:
        await keeper.ensure("billing")
        page = await keeper.unguarded_page("billing", sites.url(BILLING, "/login"))
        async with page.expect_download() as first:
            await page.evaluate(DOWNLOAD_JS, ["invoices.csv", "id,total\n1,10\n"])
        await (await first.value).path()  # finished
        saved = await keeper.save_downloads("billing", tmp_path)
        async with page.expect_download() as second:
            await page.evaluate(DOWNLOAD_JS, ["refunds.csv", "id\n"])
        await (await second.value).path()
        await sigkill(backend.current)
        turn = await keeper.ensure("billing")
    assert [p.name for p in saved] == ["invoices.csv"]
    assert saved[0].read_text() == "id,total\n1,10\n"
    assert [str(x) for x in turn.lost_downloads] == ["download:refunds.csv"]
    assert "Lost download 'refunds.csv'" in turn.to_prompt()


async def test_input_typed_in_tabs_opened_at_once_after_a_launch_is_named_lost(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Tabs opened together, the first pages of a new browser, all watch typed input."""
    backend = playwright_backend()
    conversations = [f"agent-{n}" for n in range(6)]
    async with keeper_on(backend) as keeper:

        async def fill(conversation: str) -> None:
            await keeper.ensure(conversation)
            tab = await keeper.tab(conversation, sites.url(BILLING, "/login"))
            await tab.fill("input[name=username]", CANARY)

        await asyncio.gather(*(fill(c) for c in conversations))
        await sigkill(backend.current)
        turns = [await keeper.ensure(c) for c in conversations]
    assert [[str(x) for x in t.lost_input] for t in turns] == [["input:username"]] * 6
