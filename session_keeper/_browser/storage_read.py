"""Reading web storage from a running Chromium, as a capability a session offers.

``localStorage`` and IndexedDB are read in a page of our own that never reaches the
site: every request of that page is answered locally with an empty document, so the
origin loads without a byte from (or a credential to) the server, and no site script
runs in it. ``sessionStorage`` belongs to a tab, so it is read in the conversation's own
pages. Web storage goes through DevTools (``DOMStorage.getDOMStorageItems``), not page
JavaScript, so a page's script cannot change what the keeper reads; IndexedDB is read by
our script in our page, bounded (records per store and in all, characters per value).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from session_keeper._model.storage import StorageArea, StorageItem

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page, Route

__all__ = ["WebStorage", "clear_local_storage", "read_storage", "write_local_storage"]


@runtime_checkable
class WebStorage(Protocol):
    """A session that can read and clear web storage (Playwright's, CDP's).

    Neither call sends a request to the site or runs its scripts. Both raise
    :class:`~session_keeper.errors.InvalidArgument` for an origin that is not
    ``http(s)://host[:port]`` and the session's own errors once its browser is gone.
    """

    async def storage(self, origin: str, conversation: str | None = None) -> Sequence[StorageItem]:
        """``origin``'s ``localStorage`` items and IndexedDB records, and with
        ``conversation`` the ``sessionStorage`` items of that conversation's pages on
        ``origin``."""
        ...

    async def set_storage(self, items: Sequence[StorageItem]) -> None:
        """Write ``localStorage`` items (``area == "local"``), each into its origin."""
        ...

    async def clear_storage(self, origin: str) -> None:
        """Delete ``origin``'s ``localStorage`` and IndexedDB (what the profile keeps)."""
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


#: Every IndexedDB record of the page's origin as [key, value] text (JSON where it can
#: be), ``db/store/key`` named; bounded so a big app database costs a bounded read.
_IDB_JS = """async ([perStore, total, maxValue]) => {
  const out = [];
  if (!indexedDB.databases) return out;
  const text = (v) => {
    let t;
    try { t = JSON.stringify(v); } catch (e) { t = undefined; }
    if (t === undefined) t = String(v);
    return t.length > maxValue ? t.slice(0, maxValue) + '#' + t.length : t;
  };
  for (const {name} of await indexedDB.databases()) {
    if (!name || out.length >= total) continue;
    const db = await new Promise((ok) => {
      const r = indexedDB.open(name);
      r.onsuccess = () => ok(r.result);
      r.onerror = () => ok(null);
      r.onblocked = () => ok(null);
    });
    if (db === null) continue;
    try {
      for (const store of db.objectStoreNames) {
        await new Promise((ok) => {
          let n = 0;
          const r = db.transaction(store).objectStore(store).openCursor();
          r.onsuccess = () => {
            const c = r.result;
            if (!c || n >= perStore || out.length >= total) return ok();
            out.push([name + '/' + store + '/' + text(c.key), text(c.value)]);
            n += 1;
            c.continue();
          };
          r.onerror = () => ok();
        });
      }
    } finally {
      db.close();
    }
  }
  return out;
}"""
#: Bounds of one origin's IndexedDB read: records per object store, records in all, and
#: characters of one record's value (a longer one is cut, its length kept).
IDB_PER_STORE, IDB_TOTAL, IDB_MAX_VALUE = 200, 1000, 262_144


async def _indexeddb(page: Page, origin: str) -> list[StorageItem]:
    # In our own page of the origin (no site script runs there): the app's databases.
    found = await page.evaluate(_IDB_JS, [IDB_PER_STORE, IDB_TOTAL, IDB_MAX_VALUE])
    return [
        StorageItem(origin=origin, area="indexeddb", key=str(key), value=str(value))
        for key, value in found
    ]


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
        items += await _indexeddb(page, origin)
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
    """Delete ``origin``'s ``localStorage`` and IndexedDB (from a page of ours the site
    never sees; the browser closes the app's open database connections for it)."""
    page = await _local_page(context, origin)
    try:
        cdp = await context.new_cdp_session(page)
        try:
            await cdp.send(
                "Storage.clearDataForOrigin",
                {"origin": origin, "storageTypes": "local_storage,indexeddb"},
            )
        finally:
            await cdp.detach()
    finally:
        await page.close()


async def write_local_storage(
    context: BrowserContext, origin: str, items: Sequence[StorageItem]
) -> None:
    """Write ``items`` into ``origin``'s ``localStorage`` (from a page of ours)."""
    page = await _local_page(context, origin)
    try:
        cdp = await context.new_cdp_session(page)
        try:
            await cdp.send("DOMStorage.enable")
            storage_id = {"securityOrigin": origin, "isLocalStorage": True}
            for item in items:
                await cdp.send(
                    "DOMStorage.setDOMStorageItem",
                    {"storageId": storage_id, "key": item.key, "value": item.value},
                )
        finally:
            await cdp.detach()
    finally:
        await page.close()
