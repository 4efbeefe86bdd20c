"""The keeper's block log: every refused request or navigation, kept, logged and stored.

A :class:`~session_keeper.BlockRecord` keeps names, the origin and the path only: never
the query string (it may carry tokens) and never a cookie. The Guard records the
requests it refuses here; the keeper records the navigations it refuses itself (a tab
that would leave the web), with or without a Guard.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from session_keeper._leaf.blocks import BlockRecord
from session_keeper._model.events import EventKind
from session_keeper._model.verdict import GuardVerdict
from session_keeper._model.web import block_place
from session_keeper._telemetry import Telemetry, instruments_for, url_attributes
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger

if TYPE_CHECKING:
    from session_keeper._security.audit import AuditLog
    from session_keeper._util.clock import Clock
    from session_keeper.stores import Store


__all__ = ["BLOCK_EVENT", "BlockLog", "block_attributes"]

log = scrubbing_logger("session_keeper.guard")

#: Event kind of a block in the Store's event log.
BLOCK_EVENT: Final[EventKind] = "guard_block"


def block_attributes(block: BlockRecord) -> dict[str, object]:
    """A refusal as span attributes: its rule and reason, origin and path, the names."""
    out: dict[str, object] = {
        "session_keeper.rule": block.rule,
        "session_keeper.reason": block.reason,
        "http.request.method": block.method,
        "url.path": block.path,
        "session_keeper.redirect": block.redirect,
    }
    out.update(url_attributes(block.origin))
    out["url.path"] = block.path  # the origin's own "/" is not what was refused
    for key, value in (
        ("session_keeper.conversation", block.conversation),
        ("session_keeper.site", block.site),
        ("session_keeper.action", block.action),
        ("session_keeper.resource_type", block.resource_type),
        ("session_keeper.generation", block.generation),
    ):
        if value is not None:
            out[key] = value
    return out


class BlockLog:
    """Every block of one Guard: kept in memory, logged, and stored (event or audit entry)."""

    def __init__(
        self,
        *,
        store: Store | None,
        clock: Clock,
        telemetry: Telemetry,
        audit: AuditLog | None,
    ) -> None:
        # The keeper's store, clock and telemetry are fixed when it is made: held here, a
        # block is written without calling back up into the keeper.
        self._event_store = store
        self._clock = clock
        self._telemetry = telemetry
        self._audit = audit
        self._blocks: list[BlockRecord] = []
        self._changed: asyncio.Condition | None = None
        # Store writes of blocks under way: each finishes even if its recorder is
        # cancelled (a Guard closing), and drain() waits for them.
        self._writing: set[asyncio.Task[None]] = set()
        #: The browser generation a block belongs to when its recorder does not say (the
        #: Guard sets it at each launch).
        self.generation: int | None = None

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
    ) -> BlockRecord:
        """Keep, log and store one block; return it. A store failure is logged, never raised."""
        assert verdict.rule is not None
        if generation is None:
            generation = self.generation
        origin, path = block_place(url)
        block = BlockRecord(
            conversation=conversation,
            method=method.upper(),
            origin=origin,
            path=path,
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
            extra={
                "guard_block": block.to_data(),
                **log_extra(
                    conversation=conversation,
                    rule=block.rule,
                    site=block.site,
                    action=block.action,
                    generation=generation,
                ),
            },
        )
        self._trace(block)
        # Shielded: a write cut off half way could leave the audit chain's head behind
        # the store's (the next entry would not chain).
        write = asyncio.ensure_future(self._store(block, generation))
        self._writing.add(write)
        write.add_done_callback(self._writing.discard)
        await asyncio.shield(write)
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()
        return block

    async def _store(self, block: BlockRecord, generation: int | None) -> None:
        try:
            if self._audit is not None:
                await self._audit.record(BLOCK_EVENT, block.to_data())
            else:
                store = self._event_store
                if store is not None:
                    from session_keeper.stores import Event

                    await store.append_event(
                        Event(
                            kind=BLOCK_EVENT,
                            at=self._clock.now(),
                            generation=generation,
                            data=block.to_data(),
                        )
                    )
        except Exception:
            # The block itself already happened; losing its record must not undo it.
            log.exception("guard could not store a block record")

    async def drain(self) -> None:
        """Wait until every block recorded so far is in the store (or failed to be)."""
        while self._writing:
            await asyncio.gather(*list(self._writing), return_exceptions=True)

    def _trace(self, block: BlockRecord) -> None:
        """The refusal as a span of its own (the child of the caller's span, if one is
        active; the tab operation it refused gets an event too) and as a point of the
        refusals counter by rule. Origin and path only, never a query."""
        instruments = instruments_for(self._telemetry)
        if instruments.metering:
            instruments.add("session_keeper.guard.refusals", 1, {"session_keeper.rule": block.rule})
        if not instruments.tracing:
            return
        # A refusal the browser asked for is seen in a task of the browser's driver,
        # whose context is whatever was current when it started: its span is a root then.
        root = not instruments.current_span().is_recording()
        with instruments.span("session_keeper.guard.refusal", root=root) as span:
            span.set_attributes(block_attributes(block))

    def __len__(self) -> int:
        return len(self._blocks)
