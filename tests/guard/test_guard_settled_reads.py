"""Settled reads: read-only requests to a host every page may read for good do not pause.

The Guard skips the decision only where its answer is known until a grant or a login
changes. These tests prove the skip never outlives that answer: a page of another
conversation, or a revoke, makes those requests pause (and be refused) again at once.
The sites use a ``SameSite=None`` login, so a request that escaped would carry it.
billing owns billing.example (an unlimited grant that never expires); research holds
nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.async_api import Page

from session_keeper import Guard, PlaywrightBackend, SessionKeeper
from session_keeper.testing import LocalSites

from ..conftest import shared_driver_backend
from .conftest import billing_keeper, sign_in_billing

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

LOGIN = "billing_session"


async def signed_in_gallery(keeper: SessionKeeper[Page], sites: LocalSites) -> Page:
    """Sign billing in, then load its gallery (its images are settled reads from now on)."""
    await sign_in_billing(keeper, sites)
    page = await keeper.unguarded_page("billing", sites.url("billing.example", "/gallery?n=3"))
    await page.wait_for_load_state("load")
    return page


async def load_image(page: Page, url: str) -> bool:
    """Whether ``page`` could load the image at ``url``."""
    loaded: bool = await page.evaluate(
        """(u) => new Promise(ok => {
               const i = new Image(); i.onload = () => ok(true); i.onerror = () => ok(false);
               i.src = u; document.body.appendChild(i);
           })""",
        url,
    )
    return loaded


def with_login(sites: LocalSites, mark: int, marker: str) -> int:
    """Requests to billing.example since ``mark`` whose query has ``marker``, with the login."""
    return sum(
        1
        for r in sites.requests("billing.example")[mark:]
        if marker in r.query and r.cookie(LOGIN) is not None
    )


async def test_a_page_of_a_conversation_without_a_grant_unsettles_the_host_before_it_loads(
    secure_backend: Callable[..., PlaywrightBackend], secure_sites: LocalSites
) -> None:
    """billing's images on billing.example need no decision; once research shows a page,
    research's image to billing.example is decided again, and refused."""
    keeper = billing_keeper(secure_backend())
    guard = Guard(keeper)
    async with keeper:
        billing = await signed_in_gallery(keeper, secure_sites)
        assert await load_image(billing, secure_sites.url("billing.example", "/logo.svg?own=1"))
        await keeper.ensure("research")
        research = await keeper.unguarded_page("research", secure_sites.url("docs.example", "/"))
        mark = len(secure_sites.requests("billing.example"))
        image = secure_sites.url("billing.example", "/logo.svg?stolen=1")
        assert not await load_image(research, image)
        assert with_login(secure_sites, mark, "stolen=1") == 0
        assert [b.conversation for b in guard.blocks if b.path == "/logo.svg"] == ["research"]


async def test_a_revoke_reaches_read_only_requests_of_a_settled_host_at_once(
    secure_backend: Callable[..., PlaywrightBackend], secure_sites: LocalSites
) -> None:
    """An image of a settled host loads with the login; once the revoke's update settled,
    the same page's next image is refused: nothing rides on the old answer."""
    keeper = billing_keeper(secure_backend())
    guard = Guard(keeper)
    async with keeper:
        billing = await signed_in_gallery(keeper, secure_sites)
        mark = len(secure_sites.requests("billing.example"))
        assert await load_image(billing, secure_sites.url("billing.example", "/logo.svg?before=1"))
        assert with_login(secure_sites, mark, "before=1") == 1
        keeper.revoke("billing", "billing.example")
        await guard.settle()  # the update the revoke started (no hook: nothing to wait for)
        assert not await load_image(
            billing, secure_sites.url("billing.example", "/logo.svg?after=1")
        )
        assert with_login(secure_sites, mark, "after=1") == 0
