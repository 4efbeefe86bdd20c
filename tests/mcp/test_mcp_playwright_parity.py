"""Where Playwright MCP's own suite found us different for no reason: selector targets,
going back to a page whose load never fires, find's wording."""

from __future__ import annotations

import pytest

from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, StallingSite, shared_driver_backend
from .conftest import call, structured, text
from .test_mcp_codegen import _code
from .test_mcp_tools import _page, _ref, _seen
from .test_mcp_turns import served

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(120),
]


async def test_a_target_that_is_not_a_ref_is_a_selector_in_the_conversations_page(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A CSS selector as ``target`` acts on the element it matches (the page saw it), its
    code is the selector as given (as Playwright MCP writes it), and one matching nothing
    is refused at once."""
    async with served(playwright_backend) as (_keeper, client):
        await _page(client)
        clicked = await call(
            client, "browser_click", {"target": "#twice", "doubleClick": True}, conversation="t"
        )
        assert not clicked.is_error, text(clicked)
        assert "dblclick" in (await _seen(client))["seen"]
        assert _code(text(clicked)) == "await page.locator('#twice').dblclick();"
        missing = await call(client, "browser_click", {"target": "#nope"}, conversation="t")
        assert missing.is_error
        assert text(missing) == '### Error\n"#nope" does not match any elements.'


async def test_going_back_to_a_page_whose_load_never_fires_returns(
    playwright_backend: BackendFactory, stalling_site: StallingSite
) -> None:
    """browser_navigate_back returns once the earlier page commits, as Playwright MCP's
    does, rather than waiting for a load event that never comes."""
    site = stalling_site.url
    async with served(playwright_backend) as (_keeper, client):
        await call(client, "browser_navigate", {"url": f"{site}/page-a"}, conversation="t")
        await call(client, "browser_navigate", {"url": f"{site}/page-b"}, conversation="t")
        back = await call(client, "browser_navigate_back", {}, conversation="t")
        assert not back.is_error, text(back)
        assert structured(back)["url"] == f"{site}/page-a"
        assert _code(text(back)) == "await page.goBack();"


async def test_find_answers_in_playwright_mcps_words(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Its result is a ``### Result``, a regex is shown as a regex literal, and each way of
    asking wrongly has Playwright MCP's own refusal."""
    async with served(playwright_backend) as (_keeper, client):
        await _page(client)
        found = await call(client, "browser_find", {"regex": "Twice|Hover"}, conversation="t")
        assert text(found).startswith("### Result\nFound 2 matches for /Twice|Hover/:")
        none = await call(client, "browser_find", {"regex": "/apples/i"}, conversation="t")
        assert text(none).startswith("### Result\nNo matches found for /apples/i.")
        neither = await call(client, "browser_find", {}, conversation="t")
        assert text(neither) == '### Error\nProvide either "text" or "regex" to search for.'
        both = await call(client, "browser_find", {"text": "a", "regex": "b"}, conversation="t")
        assert text(both) == '### Error\nProvide only one of "text" or "regex", not both.'


async def test_filling_a_field_answers_without_a_snapshot_and_submitting_with_one(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """As Playwright MCP: browser_type that only fills a field shows no snapshot (nothing
    on the page moved); with submit or slowly it shows the page after it."""
    async with served(playwright_backend) as (_keeper, client):
        snap = await _page(client)
        name = {"element": "Name", "target": _ref(snap, "Name")}
        filled = await call(client, "browser_type", {**name, "text": "Ada"}, conversation="t")
        assert not filled.is_error, text(filled)
        assert "### Snapshot" not in text(filled) and "snapshot" not in structured(filled)
        assert "fill('Ada')" in _code(text(filled))
        assert (await _seen(client))["name"] == "Ada"
        slowly = await call(
            client, "browser_type", {**name, "text": "Bo", "slowly": True}, conversation="t"
        )
        assert "### Snapshot" in text(slowly) and "snapshot" in structured(slowly)
