"""The live view follows a sign-in's popups: an SSO window opened from the conversation's
sign-in page is listed and shown, the person's typing reaches it, and the sign-in page
comes back when it closes.

The keeper drives a real Chromium; the person is a WebSocket client speaking the live
view's protocol, as live.js does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from demos.sites import DemoSites
from session_keeper import LoginSettings, SessionKeeper
from session_keeper.console import Console

from ..conftest import BackendFactory

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(120)]

KEY = bytes(range(32))
CONVERSATION = "team/billing"


@contextlib.asynccontextmanager
async def live_socket(console: Console) -> AsyncIterator[ClientConnection]:
    """A person signed in to ``console`` (by its login link), on CONVERSATION's live view
    socket (its path is the conversation's id, escaped, as live.js builds it)."""
    async with httpx.AsyncClient() as client:
        assert (await client.get(console.login_link())).status_code == 303
        cookie = client.cookies[console.auth.cookie_name]
    path = console.live_path(CONVERSATION).replace("?", "/ws?", 1)
    assert path.startswith(f"/live/{quote(CONVERSATION, safe='')}/ws?")
    url = f"ws://127.0.0.1:{console.port}{path}"
    headers = {"Cookie": f"{console.auth.cookie_name}={cookie}"}
    async with connect(url, additional_headers=headers) as ws:
        yield ws


async def until(
    ws: ClientConnection, check: Callable[[dict[str, Any]], bool], waited: str
) -> dict[str, Any]:
    """The next message ``check`` accepts (frames stream meanwhile); a hang bound of 30 s
    that says what was ``waited`` for and what came meanwhile."""
    came: list[str] = []
    try:
        async with asyncio.timeout(30):
            while True:
                msg = json.loads(await ws.recv())
                if check(msg):
                    return msg  # type: ignore[no-any-return]
                shown = msg.get("page") if msg.get("type") == "frame" else msg.get("shown")
                came.append(f"{msg.get('type')}:{shown}")
    except TimeoutError:
        pytest.fail(f"no {waited} in 30 s; came meanwhile: {came[-20:]}")


def pages_msg(count: int, kind: str) -> Callable[[dict[str, Any]], bool]:
    """A page list of ``count`` pages whose shown page is of ``kind``."""

    def check(msg: dict[str, Any]) -> bool:
        if msg.get("type") != "pages" or len(msg["pages"]) != count:
            return False
        shown = [p for p in msg["pages"] if p["id"] == msg["shown"]]
        return len(shown) == 1 and shown[0]["kind"] == kind

    return check


def site_frame(page_id: str) -> Callable[[dict[str, Any]], bool]:
    """A frame of page ``page_id`` showing the SSO site (not its first ``about:blank``)."""

    def check(msg: dict[str, Any]) -> bool:
        return msg.get("type") == "frame" and msg["page"] == page_id and "sso.example" in msg["url"]

    return check


async def key(ws: ClientConnection, name: str, code: str, key_code: int, text: str) -> None:
    """One key pressed and released, as live.js sends it."""
    down = {"type": "key", "action": "keyDown", "key": name, "code": code}
    await ws.send(json.dumps({**down, "keyCode": key_code, "text": text}))
    await ws.send(json.dumps({**down, "action": "keyUp", "keyCode": key_code}))


async def test_the_live_view_shows_an_sso_popup_and_typed_input_reaches_it(
    playwright_backend: BackendFactory, sites: DemoSites
) -> None:
    """The sign-in page opens the SSO sign-in in a popup: the view lists and shows it; a
    click and keys sent through the view sign in there; "show" switches pages; closing
    the popup brings the sign-in page back."""
    keeper = SessionKeeper(playwright_backend(), login_settings=LoginSettings(fingerprint_key=KEY))
    async with keeper, Console(keeper, bind="127.0.0.1:0") as console:
        await keeper.ensure(CONVERSATION)
        await keeper.tab(CONVERSATION, sites.url("docs.example", "/"))
        async with live_socket(console) as ws:
            first = await until(ws, pages_msg(1, "sign-in"), "first page list")
            tab_id = first["shown"]
            (tab,) = keeper.unguarded_sign_in_pages(CONVERSATION)  # at the tab's address
            assert tab.url == sites.url("docs.example", "/")
            async with tab.expect_popup() as opened:
                await tab.evaluate(
                    "url => { window.open(url, 'sso') }", sites.url("sso.example", "/login")
                )
            popup = await opened.value
            assert keeper.unguarded_sign_in_pages(CONVERSATION) == (tab, popup)
            assert keeper.unguarded_popups(CONVERSATION) == ()  # none of the model's pages
            listed = await until(ws, pages_msg(2, "popup"), "list showing the popup")
            popup_id = listed["shown"]
            assert popup_id != tab_id
            await until(
                ws, lambda m: m.get("type") == "frame" and m["page"] == popup_id, "popup frame"
            )

            # The person clicks the account field in the popup's frames, types, presses Enter.
            await popup.wait_for_selector("input[name=account]")
            box = await popup.locator("input[name=account]").bounding_box()
            assert box is not None
            at = {"x": box["x"] + box["width"] / 2, "y": box["y"] + box["height"] / 2}
            for action in ("mousePressed", "mouseReleased"):
                msg = {"type": "mouse", "action": action, "button": "left", "clickCount": 1}
                await ws.send(json.dumps({**msg, **at}))
            await popup.wait_for_function(
                "() => document.activeElement === document.querySelector('input[name=account]')"
            )
            for ch in "alice":
                await key(ws, ch, f"Key{ch.upper()}", ord(ch.upper()), ch)
            await popup.wait_for_function(
                "() => document.querySelector('input[name=account]').value === 'alice'"
            )
            assert await tab.evaluate("() => document.activeElement.tagName") != "INPUT"
            await key(ws, "Enter", "Enter", 13, "\r")
            await popup.wait_for_selector("#account")
            assert await popup.inner_text("#account") == "alice"

            # The person switches to the tab and back; then the popup closes by itself.
            await ws.send(json.dumps({"type": "show", "page": tab_id}))
            await until(ws, pages_msg(2, "sign-in"), "list showing the tab")
            await until(ws, lambda m: m.get("type") == "frame" and m["page"] == tab_id, "tab frame")
            await ws.send(json.dumps({"type": "show", "page": popup_id}))
            await until(ws, pages_msg(2, "popup"), "list showing the popup again")
            await popup.close()
            back = await until(ws, pages_msg(1, "sign-in"), "list after the popup closed")
            assert back["shown"] == tab_id

            # A page id the view never listed is refused, and nothing switches.
            await ws.send(json.dumps({"type": "show", "page": "p99"}))
            refused = await until(
                ws, lambda m: m.get("type") in ("error", "pages"), "refusal of p99"
            )
            assert refused["type"] == "error"


async def test_a_popup_that_changes_site_as_it_opens_is_shown_every_time(
    playwright_backend: BackendFactory, sites: DemoSites
) -> None:
    """A popup leaving ``about:blank`` for another site swaps renderer process while the
    view attaches (CDP refuses the screencast meanwhile): each of 20 in a row is still
    listed, shown, and streams frames of the site it loaded."""
    keeper = SessionKeeper(playwright_backend(), login_settings=LoginSettings(fingerprint_key=KEY))
    async with keeper, Console(keeper, bind="127.0.0.1:0") as console:
        await keeper.ensure(CONVERSATION)
        await keeper.tab(CONVERSATION, sites.url("docs.example", "/"))
        async with live_socket(console) as ws:
            await until(ws, pages_msg(1, "sign-in"), "first page list")
            (tab,) = keeper.unguarded_sign_in_pages(CONVERSATION)
            for n in range(20):
                async with tab.expect_popup() as opened:
                    await tab.evaluate(
                        "([url, name]) => { window.open(url, name) }",
                        [sites.url("sso.example", "/login"), f"sso{n}"],
                    )
                popup = await opened.value
                listed = await until(ws, pages_msg(2, "popup"), f"list showing popup {n}")
                popup_id = listed["shown"]
                await until(ws, site_frame(popup_id), f"a frame of popup {n} at the sign-in site")
                await popup.close()
                await until(ws, pages_msg(1, "sign-in"), f"list after popup {n} closed")
