"""A tab's URL is the one its main frame last committed, however it got there (fake backend).

The same on real Chromium, against a site's own request log: ``tests/real/test_tab_url_truth.py``.
"""

from __future__ import annotations

from session_keeper import SessionKeeper
from session_keeper.testing import FakePage

from .conftest import SpyBackend

START = "https://docs.example/start"


async def test_a_tab_the_page_moved_is_told_lost_where_it_was_without_a_round_trip(
    keeper: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """A commit the page made itself moves the tab's URL, with no browser call; a crash then
    names the tab lost at that URL, not at the one tab(url) opened."""
    await keeper.ensure("c")
    page = await keeper.unguarded_page("c", START)
    calls = len(backend.round_trips)
    page.moved_to("https://docs.example/after-submit?id=7")
    assert backend.round_trips[calls:] == []
    assert keeper.last_verified_url("c") == "https://docs.example/after-submit?id=7"
    await backend.crash()
    turn = await keeper.ensure("c")
    assert turn.lost_tab is not None
    assert turn.lost_tab.last_url == "https://docs.example/after-submit?id=7"
    # Told without its query (a URL may carry a token), kept whole for the reopen.
    assert "Lost tab at https://docs.example/after-submit:" in turn.to_prompt()


async def test_a_tab_that_left_the_web_keeps_its_last_web_url(
    keeper: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """about:blank, an error page or a data: URL is no place to reopen: the last web URL stands."""
    await keeper.ensure("c")
    page = await keeper.unguarded_page("c", START)
    for url in ("about:blank", "chrome-error://chromewebdata/", "data:text/html,<p>x</p>"):
        page.moved_to(url)
        assert keeper.last_verified_url("c") == START
    await backend.crash()
    turn = await keeper.ensure("c")
    assert turn.lost_tab is not None and turn.lost_tab.last_url == START


async def test_a_popup_that_moves_leaves_the_tab_where_it_is(
    keeper: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """Only the conversation's tab is named and reopened: its popups' commits do not move it."""
    await keeper.ensure("c")
    page = await keeper.unguarded_page("c", START)
    popup = await page.open_popup("https://docs.example/popup")
    popup.moved_to("https://docs.example/popup-next")
    assert keeper.last_verified_url("c") == START


async def test_a_commit_of_a_browser_the_keeper_left_changes_nothing(
    keeper: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """A page of a dead browser (a late event) does not move the tab of the new one."""
    await keeper.ensure("c")
    old = await keeper.unguarded_page("c", START)
    await backend.crash()
    await keeper.ensure("c")
    await keeper.unguarded_page("c", "https://docs.example/new")
    old.moved_to("https://docs.example/late")
    assert keeper.last_verified_url("c") == "https://docs.example/new"
