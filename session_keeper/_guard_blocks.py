"""What the Guard keeps of a refused request: a :class:`BlockRecord`, stored and logged.

Names, the origin and the path only: never the query string (it may carry tokens) and
never a cookie. Also the two local pages the Guard answers with (the block page and the
holding page), so the mechanics module holds only mechanics.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import attrs

from session_keeper._guard_policy import BlockRule, GuardVerdict, origin_of
from session_keeper._redact import scrubbing_logger

if TYPE_CHECKING:
    from session_keeper._audit import AuditLog
    from session_keeper._keeper import SessionKeeper

__all__ = ["BLOCK_EVENT", "BlockLog", "BlockRecord"]

log = scrubbing_logger("session_keeper.guard")

#: Event kind of a block in the Store's event log.
BLOCK_EVENT: Final = "guard_block"

#: ``<meta name=...>`` that marks the holding page.
HOLD_MARK: Final = "session-keeper-hold"

HOLD_PAGE: Final = (
    "<!doctype html><html><head><meta charset='utf-8'>"
    f"<meta name='{HOLD_MARK}' content='1'><title>Checking…</title></head>"
    "<body><p>session_keeper is checking this window before it loads.</p></body></html>"
)


def block_page(reason: str) -> str:
    """The local 403 page that names why a request was refused."""
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Blocked by session_keeper"
        "</title></head><body><h1>Blocked by session_keeper</h1>"
        f"<p id='session-keeper-blocked'>{html.escape(reason)}</p></body></html>"
    )


@attrs.frozen(kw_only=True)
class BlockRecord:
    """One request the Guard answered with a local 403. Names only, never a secret."""

    conversation: str | None
    method: str
    #: ``scheme://host[:port]`` of the refused request.
    origin: str
    #: The path, without query string or fragment (they may carry tokens).
    path: str
    rule: BlockRule
    reason: str
    #: The signed-in site whose login the request would have carried, if any.
    site: str | None = None
    action: str | None = None
    resource_type: str | None = None
    #: ``True`` when the request was a redirect hop (seen through CDP ``Fetch``).
    redirect: bool = False
    generation: int | None = None

    def to_data(self) -> dict[str, object]:
        """The record as JSON-ready event data."""
        return attrs.asdict(self)


class BlockLog:
    """Every block of one Guard: kept in memory, logged, and stored (event or audit entry)."""

    def __init__(self, keeper: SessionKeeper[Any], audit: AuditLog | None) -> None:
        self._keeper = keeper
        self._audit = audit
        self._blocks: list[BlockRecord] = []
        self._changed: asyncio.Condition | None = None

    @property
    def blocks(self) -> tuple[BlockRecord, ...]:
        """Every block so far, oldest first."""
        return tuple(self._blocks)

    async def wait_for(
        self, predicate: Callable[[BlockRecord], bool], *, since: int = 0
    ) -> BlockRecord:
        """Wait until a block matching ``predicate`` happened (among ``blocks[since:]``)."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            while True:
                found = next((b for b in self._blocks[since:] if predicate(b)), None)
                if found is not None:
                    return found
                await self._changed.wait()

    async def record(
        self,
        conversation: str | None,
        url: str,
        method: str,
        verdict: GuardVerdict,
        resource_type: str | None = None,
        *,
        redirect: bool = False,
        generation: int | None = None,
    ) -> None:
        """Keep, log and store one block. A store failure is logged, never raised."""
        assert verdict.rule is not None
        block = BlockRecord(
            conversation=conversation,
            method=method.upper(),
            origin=origin_of(url) or "",
            path=urlsplit(url).path or "/",
            rule=verdict.rule,
            reason=verdict.reason,
            site=verdict.site,
            action=verdict.action,
            resource_type=resource_type,
            redirect=redirect,
            generation=generation,
        )
        self._blocks.append(block)
        log.warning(
            "guard blocked %s %s%s (%s): %s",
            block.method,
            block.origin,
            block.path,
            block.rule,
            block.reason,
            extra={"guard_block": block.to_data()},
        )
        try:
            if self._audit is not None:
                await self._audit.record(BLOCK_EVENT, block.to_data())
            else:
                store = self._keeper.store
                if store is not None:
                    from session_keeper._store import Event

                    await store.append_event(
                        Event(
                            kind=BLOCK_EVENT,
                            at=self._keeper.clock.now(),
                            generation=generation,
                            data=block.to_data(),
                        )
                    )
        except Exception:
            # The block itself already happened; losing its record must not undo it.
            log.exception("guard could not store a block record")
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    def __len__(self) -> int:
        return len(self._blocks)
