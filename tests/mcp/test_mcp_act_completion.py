"""An act's result shows what the act set off, as Playwright MCP's do: a dialog or a
navigation a moment later, and the page once the requests it made are answered."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from session_keeper import Grant, Guard, SessionKeeper
from session_keeper.errors import InvalidArgument
from session_keeper.mcp import KeeperMCP
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import call, page_server, structured, text
from .test_mcp_turns import served

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(180),
]

PAGES = {
    "/alert": "<title>Title</title>"
    "<button onclick=\"setTimeout(() => alert('Alert'), 100)\">Button</button>",
    "/leave": "<button onclick=\"setTimeout(() => location = '/arrived', 100)\">Submit</button>",
    "/leave-later": "<button onclick=\"setTimeout(() => location = '/arrived', 1500)\">"
    "Submit</button>",
    "/arrived": "<title>Arrived</title><p>here</p>",
    "/fetch": "<button onclick=\"fetch('/slow').then(r => r.text()).then(t => "
    "document.querySelector('#out').textContent = t)\">Load</button><p id='out'>empty</p>",
}
SLOW_S = 0.8


@pytest.fixture
def pages() -> Iterator[str]:
    """The pages above on loopback (``/slow`` answers after SLOW_S); yields the origin."""
    with page_server(PAGES, {"/slow": (SLOW_S, "loaded-late")}) as origin:
        yield origin


async def _button(client: Any, url: str, name: str) -> str:
    """Open ``url``; the ref of its button ``name``."""
    opened = await call(client, "browser_navigate", {"url": url}, conversation="t")
    m = re.search(rf'button "{name}" \[ref=((?:f\d+)?e\d+)\]', str(structured(opened)["snapshot"]))
    assert m is not None, text(opened)
    return m.group(1)


async def _click(client: Any, ref: str) -> Any:
    return await call(
        client, "browser_click", {"element": "button", "target": ref}, conversation="t"
    )


async def test_a_dialog_an_act_sets_off_a_moment_later_is_in_its_result(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str
) -> None:
    """A click whose alert comes 100 ms later answers with the modal state (and its
    code); answering the dialog shows the page."""
    async with served(playwright_backend) as (_keeper, client):
        clicked = await _click(client, await _button(client, f"{pages}/alert", "Button"))
        modal = '- ["alert" dialog with message "Alert"]: can be handled by browser_handle_dialog'
        assert modal in text(clicked)
        assert "click()" in text(clicked)
        answered = await call(client, "browser_handle_dialog", {"accept": True}, conversation="t")
        assert "### Modal state" not in text(answered), text(answered)
        assert f"- Page URL: {pages}/alert\n- Page Title: Title" in text(answered)


async def test_a_navigation_an_act_sets_off_a_moment_later_is_in_its_result(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str
) -> None:
    """A click that leaves the page 100 ms later answers with the page it led to."""
    async with served(playwright_backend) as (_keeper, client):
        clicked = await _click(client, await _button(client, f"{pages}/leave", "Submit"))
        assert not clicked.is_error, text(clicked)
        assert structured(clicked)["url"] == f"{pages}/arrived", text(clicked)
        assert "- Page Title: Arrived" in text(clicked)


async def test_an_acts_result_waits_for_the_requests_it_made(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str
) -> None:
    """A click whose fetch is answered after SLOW_S answers with the page that answer
    made, not the page before it."""
    async with served(playwright_backend) as (_keeper, client):
        clicked = await _click(client, await _button(client, f"{pages}/fetch", "Load"))
        assert "loaded-late" in structured(clicked)["snapshot"], text(clicked)


async def test_the_settle_time_is_how_long_an_act_waits_for_what_it_set_off(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str
) -> None:
    """settle_ms=4000 (--timeout-settle 4000): a click that leaves the page 1.5 s later,
    well past the default 500 ms, answers with the page it led to."""
    async with served(playwright_backend, settle_ms=4000) as (_keeper, client):
        clicked = await _click(client, await _button(client, f"{pages}/leave-later", "Submit"))
        assert structured(clicked)["url"] == f"{pages}/arrived", text(clicked)


def test_a_settle_time_out_of_range_is_refused(playwright_backend: BackendFactory) -> None:
    """KeeperMCP(settle_ms=) is 0 to 60000 milliseconds (0 accepted); anything else is a
    typed error."""
    keeper = SessionKeeper(playwright_backend(), grants=[Grant("billing", "billing.example")])
    Guard(keeper)
    for bad in (-1, 60_001, True, "500"):
        with pytest.raises(InvalidArgument, match="settle_ms is 0 to 60000"):
            KeeperMCP(keeper, settle_ms=bad)  # type: ignore[arg-type]
    assert KeeperMCP(keeper, settle_ms=0).settle_ms == 0.0  # 0: no fixed wait at all
