"""Which page a request comes from: every frame of every watched page, by CDP frame id.

The browser's ``Fetch`` session (the Guard's watch) names only a request's frame.
Here each page gets a CDP session of its own that tells its frames:

- a page's main frame id is its target id;
- a frame it makes later is looked up (``Page.getFrameTree``) when its first request
  comes: the Page domain's events would tell each frame at once, but they cost every
  page load a stream of events;
- a cross-site frame (its own renderer, its own target) is auto-attached by the page's
  session, which learns its id, and Chromium holds it until it reports its own frames
  (``Page.frameAttached`` on its session). Playwright's ``CDPSession`` cannot address
  a flat child session, so children are driven through the (non-flat)
  ``Target.sendMessageToTarget`` channel of their parent;
- a dedicated worker's requests carry its page's frame id, and an ``about:blank``
  popup a script writes into reports its opener's (both measured). Its WebSockets are
  refused by rule (:mod:`session_keeper._guard.sockets`): every page, cross-site frame
  and worker target gets its rules before it can start a worker, and a worker's
  log tells which of its sockets a rule refused.

A page's session also renews its frames' network loaders once (:func:`_renew_loaders`):
a document committed before the browser's ``Fetch`` was on would bypass it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Final

from session_keeper._browser.playwright_session import traceback_worth_logging
from session_keeper._util.redact import scrubbing_logger

if TYPE_CHECKING:
    from playwright.async_api import CDPSession, Page

    from session_keeper._guard.sockets import SocketRules

__all__ = ["PageFrames"]

log = scrubbing_logger("session_keeper.guard")

#: How long a request of a frame nobody attributed yet waits for its page (seconds).
#: Its frame's ``Page.frameAttached`` is normally there first (measured); this only
#: covers a late event, and a frame still unknown then is nobody's (fail closed).
_ATTRIBUTION_WAIT: Final = 1.0


_AUTO_ATTACH: Final = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": False}

#: How long a child target has to answer a command we wait for (seconds).
_CHILD_ANSWER: Final = 5.0

_ids = itertools.count(1)

#: A ``Fetch`` pattern no request matches.
_NOTHING: Final = {"urlPattern": "session-keeper-pauses-nothing:*"}


async def _renew_loaders(target: _Channel) -> None:
    """Make the browser's ``Fetch`` see the requests of documents older than it.

    A document keeps the network loader it was given when it committed; one given
    before the browser's ``Fetch`` was on (a page found at a re-bind, one that lived
    through a reconnect) bypasses it, measured. Turning ``Fetch`` on and off for the
    target makes Chromium give its frames new loaders, which pass through the
    browser's interception (also measured). Pauses nothing itself.
    """
    await target.send("Fetch.enable", {"patterns": [_NOTHING]})
    await target.send("Fetch.disable")


class _Channel:
    """Sends CDP commands to one target: the page's session, or a child through it."""

    def __init__(
        self,
        cdp: CDPSession,
        path: tuple[str, ...] = (),
        answers: dict[int, asyncio.Future[None]] | None = None,
    ) -> None:
        self.cdp = cdp
        #: Session ids from the page's session down to this child (empty: the page).
        self.path = path
        # Children's answers awaited by call(), by message id (shared by a page's tree).
        self._answers: dict[int, asyncio.Future[None]] = {} if answers is None else answers

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Channel) and (other.cdp, other.path) == (self.cdp, self.path)

    def __hash__(self) -> int:
        return hash((id(self.cdp), self.path))

    def child(self, session_id: str) -> _Channel:
        return _Channel(self.cdp, (*self.path, session_id), self._answers)

    def answered(self, message: Mapping[str, Any]) -> bool:
        """Settle the call() that ``message`` answers; whether it answered one."""
        waiting = self._answers.pop(message.get("id", -1), None)
        if waiting is None:
            return False
        if not waiting.done():
            if "error" in message:
                waiting.set_exception(RuntimeError(str(message["error"].get("message", ""))))
            else:
                waiting.set_result(None)
        return True

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send and wait for the target's answer; raises when it refused or is silent."""
        if not self.path:
            await self.cdp.send(method, dict(params or {}))
            return
        number = next(_ids)
        waiting = asyncio.get_running_loop().create_future()
        self._answers[number] = waiting
        try:
            await self.send(method, params, number=number)
            await asyncio.wait_for(waiting, _CHILD_ANSWER)
        finally:
            self._answers.pop(number, None)

    async def send(
        self, method: str, params: Mapping[str, Any] | None = None, *, number: int | None = None
    ) -> None:
        """Send without waiting for a child's answer (it comes back as an event)."""
        if not self.path:
            await self.cdp.send(method, dict(params or {}))
            return
        message: dict[str, Any] = {
            "id": next(_ids) if number is None else number,
            "method": method,
            "params": params or {},
        }
        # Wrap once per level: the innermost child's message goes in first.
        for session_id in reversed(self.path[1:]):
            message = {
                "id": next(_ids),
                "method": "Target.sendMessageToTarget",
                "params": {"sessionId": session_id, "message": json.dumps(message)},
            }
        await self.cdp.send(
            "Target.sendMessageToTarget",
            {"sessionId": self.path[0], "message": json.dumps(message)},
        )


class PageFrames:
    """Every watched page's frames, by frame id; watching a page is learning them."""

    def __init__(
        self,
        *,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        on_watched: Callable[[Page, str], None],
        sockets: SocketRules,
    ) -> None:
        self._spawn = spawn
        self._on_watched = on_watched
        self._sockets = sockets
        self._sessions: dict[Page, CDPSession] = {}
        self._watching: dict[Page, asyncio.Event] = {}
        # Every frame id (main frames are target ids) of every watched page.
        self._frames: dict[str, Page] = {}
        # Set (and replaced) whenever a frame is learned or a watch fails.
        self._news = asyncio.Event()
        # Open pages whose watch failed: an unknown window may be one (fail closed).
        self._unwatchable: set[Page] = set()
        self._watch_failures = 0
        #: The target id (= main frame id) of each watched page.
        self.main_frames: dict[Page, str] = {}

    def clear(self) -> None:
        """Forget every page (their sessions died, or the browser did)."""
        self._sessions.clear()
        self._watching.clear()
        self._frames.clear()
        self.main_frames.clear()
        self._unwatchable.clear()
        self._sockets.clear()

    def sessions(self) -> tuple[CDPSession, ...]:
        """Every watched page's own CDP session."""
        return tuple(self._sessions.values())

    def page_of(self, frame: str) -> Page | None:
        """The watched page ``frame`` belongs to, if known."""
        return self._frames.get(frame)

    @property
    def unwatchable(self) -> bool:
        """Whether an open page could not be watched."""
        return bool(self._unwatchable)

    def watched(self, page: Page) -> bool:
        """Whether ``page``'s frames are known."""
        return page in self._sessions

    def forget(self, page: Page) -> None:
        """``page`` closed."""
        self.main_frames.pop(page, None)
        self._sessions.pop(page, None)
        self._unwatchable.discard(page)
        self._sockets.forget(page)
        for frame in [f for f, p in self._frames.items() if p is page]:
            del self._frames[frame]

    async def watch(self, page: Page) -> None:
        """Learn ``page``'s target id and frames (idempotent; a second caller waits)."""
        if page in self._sessions:
            return
        ready = self._watching.get(page)
        if ready is not None:
            await ready.wait()
            return
        ready = asyncio.Event()
        self._watching[page] = ready
        try:
            await self._attach(page)
        finally:
            ready.set()
            self._watching.pop(page, None)

    async def _attach(self, page: Page) -> None:
        if page.is_closed():
            return
        try:
            cdp = await page.context.new_cdp_session(page)
            # A page target's id is its main frame's id.
            info = await cdp.send("Target.getTargetInfo")
            target = str(info["targetInfo"]["targetId"])
            # Its WebSocket rules before any navigation of it is let go (fail closed:
            # a page that would not take them is a page we could not watch).
            await self._sockets.add(page, _Channel(cdp))
        except Exception as exc:
            if not page.is_closed():
                log.warning("guard could not watch a page", exc_info=traceback_worth_logging(exc))
                self._unwatchable.add(page)
                page.on("close", self._unwatchable.discard)
                self._watch_failures += 1
                self._announce()
            return
        # Its main frame is attributable from now (its first navigation may already be
        # waiting for that).
        self._sessions[page] = cdp
        self.main_frames[page] = target
        self._learn(target, page)
        self._on_watched(page, target)
        channel = _Channel(cdp)
        cdp.on("Target.attachedToTarget", lambda e: self._spawn(self._on_child(channel, page, e)))
        cdp.on("Target.detachedFromTarget", lambda e: self._detached(channel, page, e))
        cdp.on(
            "Target.receivedMessageFromTarget",
            lambda e: self._on_child_message(channel, page, e),
        )
        try:
            await _renew_loaders(channel)
            # Cross-site frames (their own renderers) are held until they report theirs.
            await cdp.send("Target.setAutoAttach", dict(_AUTO_ATTACH))
        except Exception as exc:
            if not page.is_closed():
                log.warning(
                    "guard could not follow a page's frames", exc_info=traceback_worth_logging(exc)
                )
            return
        # Frames it had before we looked (a page found at a re-bind). Frames it makes
        # later are looked up when their first request comes (wait_for_frame): the
        # Page domain's events, which would tell them at once, cost every page load.
        await self._look_up(page, cdp)

    async def _look_up(self, page: Page, cdp: CDPSession) -> None:
        """Learn every frame ``page``'s own renderer has now (bounded: never hangs)."""
        with contextlib.suppress(Exception):
            tree = await asyncio.wait_for(cdp.send("Page.getFrameTree"), _ATTRIBUTION_WAIT)
            self._learn_tree(page, tree.get("frameTree", {}))

    def _learn(self, frame: str, page: Page) -> None:
        self._frames[frame] = page
        self._announce()

    def _announce(self) -> None:
        """Wake whoever waits for a frame or a page (see :meth:`_until`)."""
        self._news.set()
        self._news = asyncio.Event()

    async def _until(self, done: Callable[[], bool], patience: float) -> None:
        """Return once ``done()`` holds after some news, or after ``patience`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        while not done():
            left = deadline - loop.time()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._news.wait(), left)

    def _learn_tree(self, page: Page, tree: Mapping[str, Any]) -> None:
        frame = tree.get("frame", {}).get("id")
        if isinstance(frame, str) and frame not in self._frames:
            self._learn(frame, page)
        for child in tree.get("childFrames", ()) or ():
            self._learn_tree(page, child)

    def _frame_attached(self, page: Page, event: Mapping[str, Any]) -> None:
        frame = event.get("frameId")
        if isinstance(frame, str) and not page.is_closed():
            self._learn(frame, page)

    async def _on_child(self, parent: _Channel, page: Page, event: dict[str, Any]) -> None:
        """A child target (a cross-site frame, a worker) waits for us: follow it, let it run."""
        child = parent.child(str(event.get("sessionId", "")))
        info = event.get("targetInfo", {})
        kind = info.get("type")
        if kind == "worker":
            await self._on_worker(parent, child, page, info)
            return
        try:
            if kind == "iframe":
                # A cross-site frame's target id is its frame id.
                if info.get("targetId"):
                    self._learn(str(info["targetId"]), page)
                # Its WebSockets and its workers' follow its own rules, not its page's
                # (measured). Chromium holds its document until we let it run.
                await self._sockets.add(page, child)
        except Exception as exc:
            # Fail closed: a frame that would not take its rules is never let run.
            log.warning(
                "guard could not guard a cross-site frame's sockets",
                exc_info=traceback_worth_logging(exc),
            )
            return
        try:
            if kind == "iframe":
                # Its own frames are reported on its session; its children are held too.
                await _renew_loaders(child)
                await child.send("Page.enable")
                await child.send("Target.setAutoAttach", _AUTO_ATTACH)
        except Exception as exc:
            log.warning(
                "guard could not follow a cross-site frame", exc_info=traceback_worth_logging(exc)
            )
        finally:
            # Always: a child never let run would hang its frame. Messages to one target
            # are handled in order, so Page.enable is on before it runs.
            with contextlib.suppress(Exception):
                await child.send("Runtime.runIfWaitingForDebugger")

    async def _on_worker(
        self, parent: _Channel, child: _Channel, page: Page, info: Mapping[str, Any]
    ) -> None:
        """A dedicated worker: its own sockets follow its creator's rules (already in
        place); it gets rules of its own for the workers it starts, and its log tells
        which of its sockets a rule refused (``Log.enable`` replays what it logged
        before: its first line may already have tried one)."""
        try:
            await self._sockets.add(page, child)
            await child.send("Log.enable")
            await child.send("Target.setAutoAttach", _AUTO_ATTACH)
        except Exception as exc:
            # Fail closed: workers it started would be unguarded. End it.
            log.warning(
                "guard could not guard a worker's sockets: closing it",
                exc_info=traceback_worth_logging(exc),
            )
            with contextlib.suppress(Exception):
                await parent.send("Target.closeTarget", {"targetId": info.get("targetId", "")})
            return
        with contextlib.suppress(Exception):
            await child.send("Runtime.runIfWaitingForDebugger")

    def _detached(self, parent: _Channel, page: Page, event: Mapping[str, Any]) -> None:
        self._sockets.drop(page, parent.child(str(event.get("sessionId", ""))))

    def _on_child_message(self, parent: _Channel, page: Page, event: dict[str, Any]) -> None:
        """A child's event (or answer), which may itself carry a grandchild's."""
        child = parent.child(str(event.get("sessionId", "")))
        try:
            message = json.loads(event.get("message", "{}"))
        except ValueError:
            return
        method = message.get("method")
        params = message.get("params", {})
        if method is None and child.answered(message):
            return
        if method == "Page.frameAttached":
            self._frame_attached(page, params)
        elif method == "Target.attachedToTarget":
            self._spawn(self._on_child(child, page, params))
        elif method == "Target.detachedFromTarget":
            self._detached(child, page, params)
        elif method == "Target.receivedMessageFromTarget":
            self._on_child_message(child, page, params)
        elif method == "Log.entryAdded":
            refused = self._sockets.logged(page, params.get("entry", {}))
            if refused is not None:
                self._spawn(refused)
        elif "error" in message:
            log.debug("guard: a child target refused a command: %s", message["error"])

    # -- attribution ------------------------------------------------------------------------
    @staticmethod
    async def target_info(cdp: CDPSession, frame: str) -> Mapping[str, Any] | None:
        """What the browser says of target ``frame``; ``None``: a frame inside some page."""
        if not frame:
            return None
        try:
            info = await cdp.send("Target.getTargetInfo", {"targetId": frame})
        except Exception:
            return None  # no target of that id
        found = info.get("targetInfo")
        return found if isinstance(found, dict) else None

    async def wait_for_frame(self, frame: str) -> Page | None:
        """The page ``frame`` belongs to, once attributed (``None`` if it is not soon).

        Asks every watched page's renderer for its frames first (a frame a page made
        since it was watched), then waits briefly for a cross-site frame's report.
        """
        if not frame:
            return None
        sessions = list(self._sessions.items())
        await asyncio.gather(*(self._look_up(page, cdp) for page, cdp in sessions))
        await self._until(lambda: frame in self._frames, _ATTRIBUTION_WAIT)
        return self._frames.get(frame)

    async def wait_for_page(self, frame: str, patience: float) -> Page | None:
        """The page of target ``frame`` (a page not watched yet): once it is watched;
        ``None`` when a page's watch failed meanwhile, or after ``patience`` seconds."""
        failures = self._watch_failures
        await self._until(
            lambda: frame in self._frames or self._watch_failures != failures, patience
        )
        return self._frames.get(frame)
