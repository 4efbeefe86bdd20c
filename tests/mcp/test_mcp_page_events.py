"""Playwright MCP's console, dialog, media and find tools, on real Chromium.

Every tool reads or acts on the calling conversation's own page; what the page did is
read back from the page itself (``browser_evaluate``), not from what a tool reported.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from playwright.async_api import Page

from session_keeper import Grant, Guard, SessionKeeper
from session_keeper._keeper.tabs.page_watch import CONSOLE_KEPT
from session_keeper.mcp import KeeperMCP
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import call, structured, text

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(180),
]


@asynccontextmanager
async def serving(
    make: BackendFactory, upload_dirs: Sequence[Path] = ()
) -> AsyncIterator[tuple[SessionKeeper[Page], Client]]:
    """A keeper (billing owns billing.example) with its Guard, served to one client."""
    keeper: SessionKeeper[Page] = SessionKeeper(
        make(), grants=[Grant("billing", "billing.example")]
    )
    Guard(keeper)
    server = KeeperMCP(keeper, upload_dirs=upload_dirs)
    async with keeper, Client(server.server) as client:
        yield keeper, client


async def build(client: Client, html: str, script: str = "", conversation: str = "t") -> str:
    """Show ``html`` (and run ``script``) on about:blank; return the page's snapshot."""
    await call(client, "browser_navigate", {"url": "about:blank"}, conversation=conversation)
    js = f"() => {{ document.body.innerHTML = {html!r}; {script}; return 'built'; }}"
    built = await call(client, "browser_evaluate", {"function": js}, conversation=conversation)
    assert not built.is_error and structured(built)["result"] == "built", text(built)
    snap = await call(client, "browser_snapshot", conversation=conversation)
    return str(structured(snap)["snapshot"])


async def page_value(client: Client, expression: str, conversation: str = "t") -> Any:
    """What ``expression`` evaluates to in the conversation's page."""
    result = await call(
        client, "browser_evaluate", {"function": f"() => {expression}"}, conversation=conversation
    )
    assert not result.is_error, text(result)
    return structured(result)["result"]


def ref_of(snapshot: str, name: str) -> str:
    """The ref of the element whose accessible name is ``name``."""
    m = re.search(rf'"{re.escape(name)}"[^\n]*\[ref=(e\d+)\]', snapshot)
    assert m is not None, f"{name!r} not in snapshot:\n{snapshot}"
    return m.group(1)


async def test_console_messages_are_the_conversations_own_at_the_level_asked(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """browser_console_messages lists this conversation's page's messages (never another
    conversation's), filtered by level, since the last navigation unless ``all``, and
    keeps a bounded number."""
    async with serving(playwright_backend) as (_keeper, client):
        await build(client, "<p>t</p>", "console.log('hello-t'); console.warn('careful-t');"
                    "console.error('bad-t'); console.debug('quiet-t')")  # fmt: skip
        await build(client, "<p>u</p>", "console.log('hello-u')", conversation="u")
        info = await call(client, "browser_console_messages", {"level": "info"}, conversation="t")
        assert not info.is_error, text(info)
        assert "Total messages: 4 (Errors: 1, Warnings: 1)" in text(info)
        assert "[LOG] hello-t @ " in text(info) and "[ERROR] bad-t" in text(info)
        assert "quiet-t" not in text(info) and "hello-u" not in text(info)
        errors = await call(
            client, "browser_console_messages", {"level": "error"}, conversation="t"
        )
        assert [m["text"] for m in structured(errors)["messages"]] == ["bad-t"]
        assert 'Returning 1 messages for level "error"' in text(errors)

        await call(client, "browser_navigate", {"url": sites.url("docs.example", "/")},
                   conversation="t")  # fmt: skip
        fresh = await call(client, "browser_console_messages", {"level": "debug"}, conversation="t")
        assert "hello-t" not in text(fresh), text(fresh)
        every = await call(
            client, "browser_console_messages", {"level": "debug", "all": True}, conversation="t"
        )
        assert {"hello-t", "careful-t", "bad-t", "quiet-t"} <= {
            m["text"] for m in structured(every)["messages"]
        }
        assert "hello-u" not in text(every)

        await page_value(client, f"{{ for (let i = 0; i < {CONSOLE_KEPT + 50}; i++) "
                         "console.log('n' + i); return 1; }")  # fmt: skip
        flood = await call(
            client, "browser_console_messages", {"level": "info", "all": True}, conversation="t"
        )
        assert structured(flood)["total"] == CONSOLE_KEPT
        assert structured(flood)["messages"][-1]["text"] == f"n{CONSOLE_KEPT + 49}"


async def test_an_unanswered_dialog_answers_the_call_and_handle_dialog_answers_it(
    playwright_backend: BackendFactory,
) -> None:
    """A dialog never hangs a call: the call that opened it returns with Playwright MCP's
    "Modal state" section, page tools are refused until browser_handle_dialog answers it,
    and the page receives the answer (accept, dismiss, promptText)."""
    async with serving(playwright_backend) as (_keeper, client):
        snap = await build(
            client,
            "<button id=c>Confirm it</button><button id=p>Prompt it</button>",
            "c.onclick = () => { window.answer = confirm('Sure?'); };"
            "p.onclick = () => { window.answer = prompt('Name?', 'x'); }",
        )
        clicked = await call(client, "browser_click", {"target": ref_of(snap, "Confirm it")},
                             conversation="t")  # fmt: skip
        assert not clicked.is_error, text(clicked)
        assert (
            '### Modal state\n- ["confirm" dialog with message "Sure?"]: can be handled by '
            "browser_handle_dialog"
        ) in text(clicked)
        # The click the dialog holds up is shown as the code that ran, as Playwright MCP does.
        assert "await page.getByRole('button', { name: 'Confirm it' }).click();" in text(clicked)
        refused = await call(client, "browser_snapshot", conversation="t")
        assert refused.is_error
        assert 'Tool "browser_snapshot" does not handle the modal state' in text(refused)
        assert structured(refused)["modal_state"][0]["handled_by"] == "browser_handle_dialog"
        # Reading tools and the keeper's own still answer.
        assert not (await call(client, "browser_status", conversation="t")).is_error

        handled = await call(client, "browser_handle_dialog", {"accept": True}, conversation="t")
        assert not handled.is_error, text(handled)
        assert "### Snapshot" in text(handled)
        assert await page_value(client, "window.answer") is True

        await call(client, "browser_click", {"target": ref_of(snap, "Confirm it")},
                   conversation="t")  # fmt: skip
        await call(client, "browser_handle_dialog", {"accept": False}, conversation="t")
        assert await page_value(client, "window.answer") is False

        prompted = await call(client, "browser_click", {"target": ref_of(snap, "Prompt it")},
                              conversation="t")  # fmt: skip
        assert '"prompt" dialog with message "Name?"' in text(prompted)
        # A bad answer is refused and answers nothing: the dialog still waits.
        for bad in ({"accept": "yes"}, {"accept": True, "promptText": 5}):
            refused = await call(client, "browser_handle_dialog", bad, conversation="t")
            assert refused.is_error and "must be a" in text(refused), bad
        still = await call(client, "browser_snapshot", conversation="t")
        assert still.is_error and "does not handle the modal state" in text(still)
        await call(client, "browser_handle_dialog", {"accept": True, "promptText": "Ada"},
                   conversation="t")  # fmt: skip
        assert await page_value(client, "window.answer") == "Ada"

        # A dialog the script itself opens (evaluate waits on it) does not hang either.
        alerted = await call(client, "browser_evaluate", {"function": "() => alert('hi')"},
                             conversation="t")  # fmt: skip
        assert '"alert" dialog with message "hi"' in text(alerted)
        await call(client, "browser_handle_dialog", {"accept": True}, conversation="t")

        none = await call(client, "browser_handle_dialog", {"accept": True}, conversation="t")
        assert none.is_error
        assert "can only be used when there is related modal state present" in text(none)


async def test_emulate_media_changes_what_the_page_matches_and_null_clears_it(
    playwright_backend: BackendFactory,
) -> None:
    """browser_emulate_media sets the page's media features; null clears one; a bad value
    or no feature at all is refused and changes nothing."""
    dark = "matchMedia('(prefers-color-scheme: dark)').matches"
    async with serving(playwright_backend) as (_keeper, client):
        await build(client, "<p>media</p>")
        assert await page_value(client, dark) is False
        set_dark = await call(client, "browser_emulate_media", {"colorScheme": "dark",
                              "media": "print"}, conversation="t")  # fmt: skip
        assert not set_dark.is_error, text(set_dark)
        assert await page_value(client, dark) is True
        assert await page_value(client, "matchMedia('print').matches") is True
        for bad in ({"colorScheme": "purple"}, {}, {"colour": "dark"}):
            refused = await call(client, "browser_emulate_media", bad, conversation="t")
            assert refused.is_error, bad
        assert await page_value(client, dark) is True
        await call(client, "browser_emulate_media", {"colorScheme": None}, conversation="t")
        assert await page_value(client, dark) is False
        assert await page_value(client, "matchMedia('print').matches") is True


async def test_find_returns_the_matching_snapshot_nodes_under_their_path(
    playwright_backend: BackendFactory,
) -> None:
    """browser_find answers Playwright MCP's "Find results" with each match, its ref and
    the path from the root; a regex may carry flags; no match says so."""
    async with serving(playwright_backend) as (_keeper, client):
        snap = await build(
            client,
            "<nav><ul><li><a href='#a'>Home</a></li><li><a href='#b'>Orders</a></li></ul></nav>"
            "<main><h1>Your orders</h1><button>Submit order</button></main>",
        )
        found = await call(client, "browser_find", {"text": "submit"}, conversation="t")
        assert not found.is_error, text(found)
        assert 'Found 1 match for "submit":' in text(found)
        assert f"[ref={ref_of(snap, 'Submit order')}]" in text(found)
        regex = await call(client, "browser_find", {"regex": "/ORDERS/i"}, conversation="t")
        assert structured(regex)["matches"] == 2, text(regex)
        assert "- navigation" in text(regex)  # the path from the root is shown
        missing = await call(client, "browser_find", {"text": "refund"}, conversation="t")
        assert 'No matches found for "refund".' in text(missing)
        for bad in ({"text": "a", "regex": "b"}, {}, {"regex": "("}):
            refused = await call(client, "browser_find", bad, conversation="t")
            assert refused.is_error, bad


async def test_a_dialog_answered_by_someone_else_is_no_longer_the_pages_modal_state(
    playwright_backend: BackendFactory,
) -> None:
    """A dialog closed out of band (here over CDP, as a person at a headed browser
    would) stops refusing the page tools: the next snapshot shows the page."""
    async with serving(playwright_backend) as (keeper, client):
        snap = await build(
            client, "<button id=a>Alert it</button>", "a.onclick = () => alert('Hi')"
        )
        page = await keeper.unguarded_page("t")
        # Made before the dialog: a CDP session made while a dialog blocks the page hangs.
        cdp = await page.context.new_cdp_session(page)
        await cdp.send("Page.enable")
        clicked = await call(client, "browser_click", {"target": ref_of(snap, "Alert it")},
                             conversation="t")  # fmt: skip
        assert '["alert" dialog with message "Hi"]' in text(clicked), text(clicked)
        async with page.expect_event("dialogclosed"):
            await cdp.send("Page.handleJavaScriptDialog", {"accept": True})
        shown = await call(client, "browser_snapshot", conversation="t")
        assert not shown.is_error, text(shown)
        assert "### Modal state" not in text(shown) and "Alert it" in text(shown)
