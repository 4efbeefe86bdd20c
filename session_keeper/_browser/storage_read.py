"""Reading web storage from a running Chromium, as a capability a session offers.

``localStorage`` is read in a page of our own that never reaches the site: every
request of that page is answered locally with an empty document, so the origin loads
without a byte from (or a credential to) the server, and no site script runs in it.
``sessionStorage`` belongs to a tab, so it is read in the conversation's own pages. Both
go through DevTools (``DOMStorage.getDOMStorageItems``), not page JavaScript, so a
page's script cannot change what the keeper reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from session_keeper._model.storage import StorageArea, StorageItem

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page, Route

__all__ = ["WebStorage", "clear_local_storage", "read_storage"]


@runtime_checkable
class WebStorage(Protocol):
    """A session that can read and clear web storage (Playwright's, CDP's).

    Neither call sends a request to the site or runs its scripts. Both raise
    :class:`~session_keeper.errors.InvalidArgument` for an origin that is not
    ``http(s)://host[:port]`` and the session's own errors once its browser is gone.
    """

    async def storage(self, origin: str, conversation: str | None = None) -> Sequence[StorageItem]:
        """``origin``'s ``localStorage`` items, and with ``conversation`` the
        ``sessionStorage`` items of that conversation's pages on ``origin``."""
        ...

    async def clear_storage(self, origin: str) -> None:
        """Delete every ``localStorage`` item of ``origin`` (what the profile keeps)."""
        ...


async def _answer_locally(route: Route) -> None:
    await route.fulfill(status=200, content_type="text/html", body="")


def _origin_of(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.split('/', 1)[0]}".lower() if sep else ""


async def _local_page(context: BrowserContext, origin: str) -> Page:
    page = await context.new_page()
    try:
        await page.route("**/*", _answer_locally)
        await page.goto(origin + "/")
    except BaseException:
        await page.close()
        raise
    return page


async def _items(
    context: BrowserContext, page: Page, origin: str, area: StorageArea
) -> list[StorageItem]:
    cdp = await context.new_cdp_session(page)
    try:
        await cdp.send("DOMStorage.enable")
        storage_id = {"securityOrigin": origin, "isLocalStorage": area == "local"}
        answer = await cdp.send("DOMStorage.getDOMStorageItems", {"storageId": storage_id})
    finally:
        await cdp.detach()
    return [
        StorageItem(origin=origin, area=area, key=str(key), value=str(value))
        for key, value in answer.get("entries", [])
    ]


async def read_storage(
    context: BrowserContext, origin: str, session_pages: Sequence[Page]
) -> list[StorageItem]:
    """``origin``'s ``localStorage`` (read in a page of ours that the site never sees),
    then the ``sessionStorage`` of every page in ``session_pages`` showing ``origin``."""
    page = await _local_page(context, origin)
    try:
        items = await _items(context, page, origin, "local")
    finally:
        await page.close()
    seen: set[tuple[str, str]] = set()
    for tab in session_pages:
        if tab.is_closed() or _origin_of(tab.url) != origin:
            continue
        for item in await _items(context, tab, origin, "session"):
            if (item.key, item.value) not in seen:  # one origin's tabs may share a copy
                seen.add((item.key, item.value))
                items.append(item)
    return items


async def clear_local_storage(context: BrowserContext, origin: str) -> None:
    """Delete ``origin``'s ``localStorage`` (from a page of ours the site never sees)."""
    page = await _local_page(context, origin)
    try:
        cdp = await context.new_cdp_session(page)
        try:
            await cdp.send("DOMStorage.enable")
            storage_id = {"securityOrigin": origin, "isLocalStorage": True}
            await cdp.send("DOMStorage.clear", {"storageId": storage_id})
        finally:
            await cdp.detach()
    finally:
        await page.close()
