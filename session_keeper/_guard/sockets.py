"""WebSockets nobody can pause: refused by rule in Chromium's network layer.

A page's own WebSockets are judged one by one (the Guard's ``route_web_socket``
handler). A **dedicated worker's** are not: Chromium's ``Fetch`` never sees a
WebSocket handshake, a worker has no ``Fetch`` domain at all, ``Network.setBlockedURLs``
does not stop WebSockets, and a worker held at start (``waitForDebuggerOnStart``) is
let run by Playwright's own session before ours can set anything up (all measured on
Chromium 156). What does stop them is the **network-condition emulation** of the
target that created the worker (``Network.emulateNetworkConditionsByRule``, offline
for a URL pattern): Chromium fails the handshake (``ERR_INTERNET_DISCONNECTED``)
before a byte leaves, for the page's own sockets and for its workers' (measured).

So every target that can create a worker gets rules (:func:`socket_rules`) before
any script of it runs: each page (at watch, before its first navigation is let go), each
cross-site frame (held by Chromium until it is let run) and each worker (for the
workers *it* starts: a nested worker follows its creator's rules, not the page's).
The rules refuse every ``ws:``/``wss:`` URL its page's conversation may not open
*without a decision of its own* (:meth:`GuardPolicy.socket_verdict`): a worker's
socket cannot be paused to spend a use, so it passes only on what the page load
already read, or through a standing grant. They follow the page (its navigations,
its spent reads) and the keeper (logins, grants, surfaces, allowlists).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Collection, Coroutine, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from session_keeper._util.redact import scrubbing_logger

if TYPE_CHECKING:
    from playwright.async_api import Page

    from session_keeper._model.origins import AllowedOrigin

__all__ = ["SocketRules", "socket_rules"]

log = scrubbing_logger("session_keeper.guard")

Rules = list[dict[str, Any]]

#: What Chromium logs for a handshake our rule refused (measured).
_REFUSAL_TEXT: Final = re.compile(
    r"WebSocket connection to '(wss?://[^']*)' failed: .*net::ERR_INTERNET_DISCONNECTED"
)

_SCHEMES: Final = ("ws", "wss")

#: Characters the URLPattern syntax gives a meaning to (a host never needs them raw).
_SPECIAL: Final = frozenset(":*?+(){}[]\\/#@")


def _escaped(host: str) -> str:
    return "".join("\\" + c if c in _SPECIAL else c for c in host)


def _offline(pattern: str) -> dict[str, Any]:
    return {
        "urlPattern": pattern,
        "offline": True,
        "latency": 0,
        "downloadThroughput": -1,
        "uploadThroughput": -1,
    }


def _online(pattern: str) -> dict[str, Any]:
    # The first matching entry wins: an entry that emulates nothing lets it through.
    return {"urlPattern": pattern, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}


def socket_rules(
    refused_hosts: Collection[str],
    ports: Collection[int],
    allowed: Collection[AllowedOrigin] | None,
) -> Rules:
    """Chromium network-condition rules refusing WebSockets to ``refused_hosts`` (and
    their subdomains), to every host on one of ``ports`` (the keeper's surfaces), and,
    when the conversation has an allowlist (``allowed``), to every origin outside it."""
    if any(port in (80, 443) for port in ports):
        # A surface on a default port: its URLs carry no port to match on.
        return [_offline(f"{scheme}://*:*/*") for scheme in _SCHEMES]
    rules = [_offline(f"{s}://*:{port}/*") for port in sorted(ports) for s in _SCHEMES]
    for host in sorted(refused_hosts):
        rules.extend(_offline(f"{s}://{{*.}}?{_escaped(host)}:*/*") for s in _SCHEMES)
    if allowed is not None:
        for origin in sorted(allowed, key=str):
            if origin.scheme in ("http", "https"):
                continue  # an http(s) entry admits no WebSocket (AllowedOrigin.admits)
            for scheme in _SCHEMES if origin.scheme is None else (origin.scheme,):
                default = {"ws": 80, "wss": 443}[scheme]
                port = "*" if origin.port is None else str(origin.port)
                if origin.port == default:
                    port = ""  # Chromium leaves a default port out of the URL
                where = f":{port}" if port else ""
                rules.append(_online(f"{scheme}://{_escaped(origin.host)}{where}/*"))
        rules.extend(_offline(f"{scheme}://*:*/*") for scheme in _SCHEMES)
    return rules


class Target(Protocol):
    """A CDP target that takes rules: a page's session, or a child through it."""

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send and wait for its answer (raises when the target refused it)."""


#: The rules each page's targets should hold now: (a key that changes with them, rules).
RulesNow = Callable[["Page"], tuple[Hashable, Rules]]


class SocketRules:
    """Every watched page's rule-holding targets, and what each was last given."""

    def __init__(
        self,
        *,
        rules_for: RulesNow,
        refused: Callable[[Page, str], Coroutine[Any, Any, None]],
    ) -> None:
        self._rules_for = rules_for
        self._refused = refused
        self._targets: dict[Page, list[Target]] = {}
        # The key of the rules each page's targets hold.
        self._applied: dict[Page, Hashable] = {}
        # One update of a page's targets at a time: a caller that finds its key applied
        # must find its rules in place, not still on their way.
        self._locks: dict[Page, asyncio.Lock] = {}

    def clear(self) -> None:
        """Forget every page (their sessions died)."""
        self._targets.clear()
        self._applied.clear()
        self._locks.clear()

    def forget(self, page: Page) -> None:
        """``page`` closed."""
        self._targets.pop(page, None)
        self._applied.pop(page, None)
        self._locks.pop(page, None)

    async def add(self, page: Page, target: Target) -> None:
        """Give ``target`` (of ``page``) its rules; raises when it would not take them."""
        async with self._lock(page):
            key, rules = self._rules_for(page)
            await target.call("Network.emulateNetworkConditionsByRule", _params(rules))
            self._targets.setdefault(page, []).append(target)
            stale = self._applied.setdefault(page, key) != key
        if stale:
            # The page's other targets hold older rules: bring them all up to date.
            self._applied.pop(page, None)
            await self.refresh(page)

    def _lock(self, page: Page) -> asyncio.Lock:
        return self._locks.setdefault(page, asyncio.Lock())

    def drop(self, page: Page, target: Target) -> None:
        """``target`` of ``page`` went away (a worker ended, a frame left)."""
        with contextlib.suppress(ValueError):
            self._targets.get(page, []).remove(target)

    async def refresh(self, page: Page) -> None:
        """Make ``page``'s targets hold its current rules (nothing sent when they do)."""
        if not self._targets.get(page):
            return
        async with self._lock(page):
            key, rules = self._rules_for(page)
            if self._applied.get(page) == key:
                return
            targets = list(self._targets.get(page, ()))
            # All at once: a worker that is going away must not hold up its page.
            answers = await asyncio.gather(
                *(
                    t.call("Network.emulateNetworkConditionsByRule", _params(rules))
                    for t in targets
                ),
                return_exceptions=True,
            )
            for target, answer in zip(targets, answers, strict=True):
                if isinstance(answer, BaseException):
                    # A target that is gone holds nothing; one that stays keeps older rules.
                    log.debug("guard could not update a target's WebSocket rules: %r", answer)
                    self.drop(page, target)
            self._applied[page] = key

    async def refresh_all(self) -> None:
        """A login, grant, surface or allowlist changed: every page's rules follow."""
        for page in list(self._targets):
            await self.refresh(page)

    def logged(self, page: Page, entry: Mapping[str, Any]) -> Coroutine[Any, Any, None] | None:
        """A worker's log entry: a socket refused by rule is recorded as a block.

        Chromium logs every failed handshake (source ``network``, measured); a worker
        may also log that text itself, which records a block that never was (noise,
        never a socket let through).
        """
        if entry.get("source") != "network":
            return None
        found = _REFUSAL_TEXT.match(str(entry.get("text", "")))
        if found is None:
            return None
        return self._refused(page, found.group(1))


def _params(rules: Rules) -> dict[str, Any]:
    return {"matchedNetworkConditions": rules}
