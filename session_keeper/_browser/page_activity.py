"""What a restart would take from a page besides its URL: typed input and downloads.

A tab reopened at its last URL comes back with empty forms, and Chromium deletes a
context's downloads when it closes. :class:`PageActivity` (attached by a
:class:`PlaywrightSession` to every page it owns) keeps, per conversation and without a
round trip:

- **unsubmitted input**: the form fields whose value differs from the page's own default
  (typed by the agent or by a person in the live view) and that no form submission or
  navigation has taken since, by field name (``name``, ``id``, ``aria-label`` or
  ``placeholder``) — never a value. A script of ours, run before the page's own, reports
  each field's change of state through a binding; a site's script may hide its own
  fields from it (best effort: it is the page's own data), never read anything.
- **downloads** that started and were not saved (:meth:`save_downloads`): in flight, or
  finished in the browser's temporary download directory.

Sessions that offer this satisfy :class:`ActivityObserving`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import attrs
from playwright.async_api import BrowserContext, Download, Frame, Page

from session_keeper._util.redact import redact_url

__all__ = ["ActivityObserving", "DownloadSeen", "InputSeen", "PageActivity"]

BINDING = "__session_keeper_input"
#: At most this many dirty fields are kept per page (a hostile page cannot grow it).
MAX_FIELDS = 32
MAX_NAME = 64

_WATCH_JS = """(() => {
  const send = window.BINDING;
  if (typeof send !== 'function' || window.__sessionKeeperInputWatch) return;
  window.__sessionKeeperInputWatch = true;
  const label = (el) => String(el.getAttribute('name') || el.id
    || el.getAttribute('aria-label') || el.getAttribute('placeholder')
    || el.tagName.toLowerCase()).slice(0, MAX_NAME);
  const dirty = (el) => {
    if (el instanceof HTMLInputElement) {
      if (el.type === 'checkbox' || el.type === 'radio') return el.checked !== el.defaultChecked;
      if (el.type === 'file') return !!(el.files && el.files.length);
      if (['hidden', 'submit', 'button', 'reset', 'image'].includes(el.type)) return false;
      return el.value !== el.defaultValue;
    }
    if (el instanceof HTMLTextAreaElement) return el.value !== el.defaultValue;
    if (el instanceof HTMLSelectElement) {
      return [...el.options].some(o => o.selected !== o.defaultSelected);
    }
    return !!el.isContentEditable;
  };
  const state = new Map();
  const note = (el, d) => {
    const name = label(el);
    if (state.get(name) !== d) { state.set(name, d); send(name, d); }
  };
  const changed = (event) => {
    const el = event.target;
    if (el && el.getAttribute) note(el, dirty(el));
  };
  document.addEventListener('input', changed, true);
  document.addEventListener('change', changed, true);
  document.addEventListener('submit', (event) => {
    for (const el of (event.target && event.target.elements) || []) {
      if (state.get(label(el))) note(el, false);
    }
  }, true);
})();""".replace("BINDING", BINDING).replace("MAX_NAME", str(MAX_NAME))

#: How long a page that closed waits for its browser to answer before its typed input is
#: kept as the restart's loss (a browser that does not answer is dying or unreachable).
CLOSE_CHECK_S = 30.0

#: A report of ours through the page's binding: answered only after every report the
#: page sent before it was handled (binding calls reach us in order).
_COUNTED_JS = f"() => typeof window.{BINDING} === 'function' && window.{BINDING}(null, false)"
#: How long an act waits for that answer (a page that broke its binding is left as is).
COUNTED_WAIT_S = 2.0

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@attrs.frozen(kw_only=True)
class InputSeen:
    """A form field with unsubmitted input (its name only, never its value)."""

    conversation: str
    field: str
    #: The page's URL when the input was typed (no query or fragment).
    url: str | None
    at: datetime


@attrs.frozen(kw_only=True)
class DownloadSeen:
    """A download a page started that nobody saved yet."""

    conversation: str
    #: The file name the site suggested.
    filename: str
    #: The download's URL (no query or fragment).
    url: str | None
    state: Literal["in_flight", "finished", "failed"]
    at: datetime


@runtime_checkable
class ActivityObserving(Protocol):
    """A session that reports what a restart would take from its pages besides URLs."""

    def unsubmitted_input(self, conversation: str | None = None) -> Sequence[InputSeen]:
        """The conversation's (every one's, without it) fields with typed, unsubmitted
        input, oldest first (no round trip)."""
        ...

    def unsaved_downloads(self, conversation: str | None = None) -> Sequence[DownloadSeen]:
        """The conversation's (every one's, without it) downloads not saved yet (no
        round trip)."""
        ...

    async def save_downloads(self, conversation: str, directory: Path) -> tuple[Path, ...]:
        """Save the conversation's finished downloads into ``directory``; return the paths."""
        ...

    async def input_counted(self, page: object) -> None:
        """Return once the input typed into ``page`` so far is counted (bounded; never
        raises: a page gone or broken is left as it is)."""
        ...


def _clean(value: object, limit: int) -> str:
    text = _CONTROL.sub("", str(value)).strip()[:limit]
    return text or "?"


class PageActivity:
    """Unsubmitted input and unsaved downloads of a session's pages (see the module)."""

    def __init__(
        self,
        now: Callable[[], datetime],
        owner_of: Callable[[Page], str | None],
        ending: Callable[[], bool],
        answers: Callable[[], Awaitable[object]],
    ) -> None:
        self._now = now
        self._owner_of = owner_of
        #: Whether the browser is going away: a page it closes keeps what it had (the
        #: restart takes it), where a page closed on purpose drops its input.
        self._ending = ending
        #: One round trip to the browser: returns once it answered, raises if it is gone.
        self._answers = answers
        self._installing: asyncio.Task[None] | None = None
        self._bound = False
        self._scripted = False
        self._input: dict[Page, dict[str, InputSeen]] = {}
        self._downloads: dict[Download, DownloadSeen] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def installing(self, context: BrowserContext) -> asyncio.Task[None]:
        """The install of the binding and the watch script into ``context``: one at a time,
        shared by every caller, started again after one failed. Await it (shielded) before
        opening a page: measured, of six pages opened while it ran (the first pages of a
        new browser), five watched nothing.
        """
        task = self._installing
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._installing = asyncio.get_running_loop().create_task(self._install(context))
            task.add_done_callback(_retrieve)
        return task

    async def install_settled(self, bound_s: float) -> None:
        """Return once no install is in flight (at most ``bound_s`` seconds; its failure is
        the next opener's news, not ours).

        A context closed while its binding or script is being added can answer that call
        after it disposed the context's objects: Playwright's client then cannot match the
        answer, and raises the mismatch from the next call on the same driver, whatever it
        is (seen in CI: the next launch failed with "Object with guid disposable@... was not
        bound in the connection"). A clean close waits for the install first.
        """
        task = self._installing
        if task is not None and not task.done():
            # wait(): neither the task's failure nor its cancellation (a dying browser's
            # tasks are cancelled) is raised here, and a timeout leaves it running.
            await asyncio.wait({task}, timeout=bound_s)

    def rebind(self) -> None:
        """The browser is now reached through a new connection (a CDP reconnect): what was
        installed lived on the old one (Chromium drops a DevTools session's scripts and
        bindings with it), so the next :meth:`installing` installs into the new context."""
        self._installing = None
        self._bound = self._scripted = False

    async def _install(self, context: BrowserContext) -> None:
        """Expose the binding, then the watch script, to every page of ``context`` (each once)."""
        if not self._bound:
            await context.expose_binding(BINDING, self._on_input)
            self._bound = True
        if not self._scripted:
            await context.add_init_script(_WATCH_JS)
            self._scripted = True

    def attach(self, page: Page) -> None:
        """Watch ``page``'s navigations (they take its input) and downloads."""
        page.on("framenavigated", lambda frame: self._navigated(page, frame))
        page.on("download", self._on_download)
        page.on("close", lambda _: self._page_closed(page))

    def _page_closed(self, page: Page) -> None:
        # A dying or cut-off browser's pages can close before anything says so (a dropped
        # socket closes them first, and a remote browser has no process of ours to ask):
        # a page that closed is forgotten only once the browser has answered since.
        if self._input.get(page) and not self._ending():
            self._track(self._forget_if_closed_for_good(page))

    async def _forget_if_closed_for_good(self, page: Page) -> None:
        try:
            await asyncio.wait_for(self._answers(), CLOSE_CHECK_S)
        except Exception:  # no answer: the browser is going, and the restart takes it
            return
        # A page re-adopted by a reconnect is open again, with input typed since.
        if page.is_closed() and not self._ending():
            self._input.pop(page, None)

    def forget(self, page: Page) -> None:
        """``page`` is being closed on purpose: what was typed into it is nobody's loss."""
        self._input.pop(page, None)

    def _navigated(self, page: Page, frame: Frame) -> None:
        if frame == page.main_frame:
            self._input.pop(page, None)

    async def counted(self, page: Page) -> None:
        """Return once the input ``page`` reported so far is counted: an act returns
        before the page's report of it reaches us, and a crash right after would lose it."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(page.evaluate(_COUNTED_JS), COUNTED_WAIT_S)

    def _on_input(self, source: Any, name: object, dirty: object) -> None:
        page = source.get("page") if isinstance(source, dict) else None
        if name is None or not isinstance(page, Page):
            return
        conversation = self._owner_of(page)
        if conversation is None:
            return
        field = _clean(name, MAX_NAME)
        fields = self._input.setdefault(page, {})
        if not dirty:
            fields.pop(field, None)
        elif field in fields or len(fields) < MAX_FIELDS:
            url = redact_url(page.url) if page.url.startswith(("http:", "https:")) else None
            fields[field] = InputSeen(
                conversation=conversation, field=field, url=url, at=self._now()
            )

    def _on_download(self, download: Download) -> None:
        conversation = self._owner_of(download.page)
        if conversation is None:
            return
        seen = DownloadSeen(
            conversation=conversation,
            filename=_clean(download.suggested_filename, 128),
            url=redact_url(download.url),
            state="in_flight",
            at=self._now(),
        )
        self._downloads[download] = seen
        self._track(self._finish(download))

    def _track(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, download: Download) -> None:
        try:
            failure = await download.failure()
        except Exception:  # the browser went away: it stays in flight, as it was
            return
        seen = self._downloads.get(download)
        if seen is not None:
            state: Literal["finished", "failed"] = "failed" if failure else "finished"
            self._downloads[download] = attrs.evolve(seen, state=state)

    def unsubmitted_input(self, conversation: str | None = None) -> tuple[InputSeen, ...]:
        """See :meth:`ActivityObserving.unsubmitted_input`."""
        found = (s for fields in self._input.values() for s in fields.values())
        return tuple(
            sorted(
                (s for s in found if conversation in (None, s.conversation)),
                key=lambda s: s.at,
            )
        )

    def unsaved_downloads(self, conversation: str | None = None) -> tuple[DownloadSeen, ...]:
        """See :meth:`ActivityObserving.unsaved_downloads` (failed ones are not listed)."""
        return tuple(
            d
            for d in self._downloads.values()
            if conversation in (None, d.conversation) and d.state != "failed"
        )

    async def save_downloads(self, conversation: str, directory: Path) -> tuple[Path, ...]:
        """See :meth:`ActivityObserving.save_downloads`: in-flight ones are left for later."""
        saved: list[Path] = []
        for download, seen in list(self._downloads.items()):
            if seen.conversation != conversation or seen.state != "finished":
                continue
            name = Path(seen.filename).name
            target = _free_name(directory, name if name not in ("", ".", "..") else "download")
            await download.save_as(target)
            del self._downloads[download]
            saved.append(target)
        return tuple(saved)

    def close(self) -> None:
        """Stop the download waits and close checks (the browser is gone)."""
        for task in self._tasks:
            task.cancel()


def _retrieve(task: asyncio.Task[None]) -> None:
    """Retrieve an install's failure (the next page opener starts it again)."""
    if not task.cancelled():
        task.exception()


def _free_name(directory: Path, name: str) -> Path:
    """``directory/name``, or ``name (2)``... when that is taken."""
    target = directory / name
    stem, suffix = Path(name).stem, Path(name).suffix
    n = 2
    while target.exists():
        target = directory / f"{stem} ({n}){suffix}"
        n += 1
    return target
