"""Which Guard watches a keeper: lets the keeper and its handles tell a blocked navigation.

The Guard is built on the keeper, so the keeper knows it only as an
:class:`AttachedGuard`: the few things a navigation needs to ask of it
(:class:`NavigationGuard`), and how to close it. The link is the keeper's own typed
attribute (:class:`Guarded`), which the Guard sets when it is made
(``SessionKeeper.attach_guard``, refused while another is attached) and clears when it
closes (``SessionKeeper.detach_guard``); the keeper's close closes it. No registry
beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from session_keeper._model.web import block_place, non_web_reason
from session_keeper.errors import NavigationBlocked

if TYPE_CHECKING:
    from session_keeper._keeper.guard_link.block_log import BlockLog
    from session_keeper._leaf.blocks import BlockRecord


class NavigationGuard(Protocol):
    """What a navigation asks of the Guard that watches its keeper."""

    @property
    def blocks(self) -> Sequence[BlockRecord]:
        """Every block so far, oldest first."""
        ...

    @property
    def block_log(self) -> BlockLog:
        """Where the Guard keeps its blocks (the keeper's own refusals go there too)."""
        ...

    def navigation_refusal(self, page: Any, since: int) -> BlockRecord | None:
        """The refusal of ``page``'s top-level navigation among ``blocks[since:]``, if any."""
        ...


class AttachedGuard(NavigationGuard, Protocol):
    """The Guard as its keeper holds it: asked by navigations, closed with the keeper."""

    async def aclose(self) -> None:
        """End the Guard's part in the keeper (its hooks, its watch): the keeper's close
        calls it. Idempotent."""
        ...


class Guarded(Protocol):
    """A keeper as the navigation checks see it: the Guard attached to it, if any."""

    @property
    def navigation_guard(self) -> NavigationGuard | None:
        """The Guard enforcing this keeper's grants (the one attached, open), if any."""
        ...


def guard_of(keeper: Guarded) -> NavigationGuard | None:
    """The Guard made for ``keeper``, if any."""
    return keeper.navigation_guard


def navigation_mark(keeper: Guarded) -> int:
    """A position in the Guard's block list; blocks after it are new."""
    guard = keeper.navigation_guard
    return 0 if guard is None else len(guard.blocks)


def navigation_block(
    keeper: Guarded, conversation: str, url: str, since: int
) -> BlockRecord | None:
    """The Guard's record of refusing the document now shown at ``url``, if it did.

    The Guard records a block before it answers with its 403 page, so when a
    navigation returns, its record (if any) is already among ``blocks[since:]``.
    """
    guard = keeper.navigation_guard
    if guard is None:
        return None
    origin, path = block_place(url)
    for block in reversed(guard.blocks[since:]):
        if (
            block.conversation == conversation
            and (block.resource_type or "").lower() == "document"
            and block.origin == origin
            and block.path == path
        ):
            return block
    return None


def navigation_refusal(keeper: Guarded, page: object, since: int) -> BlockRecord | None:
    """The Guard's refusal of ``page``'s top-level navigation since ``since``, if any.

    A refused navigation of a page that shows a document is aborted, not answered
    with the 403 page (the page keeps its URL): this is how the caller learns why.
    """
    guard = keeper.navigation_guard
    if guard is None:
        return None
    return guard.navigation_refusal(page, since)


async def refuse_off_web(keeper: Any, conversation: str, url: str) -> NavigationBlocked | None:
    """``None`` when ``url`` is on the web; else the refusal, recorded like any block.

    Checked before the navigation starts, for every navigation the keeper is asked for
    (a tab's, a popup's): Chromium shows ``chrome:`` pages without any request the
    Guard could pause, so the rule cannot wait for the network. With no Guard, the
    block is logged and stored all the same.
    """
    reason = non_web_reason(url)
    if reason is None:
        return None
    from session_keeper._keeper.guard_link.block_log import BlockLog
    from session_keeper._model.verdict import GuardVerdict

    verdict = GuardVerdict(allowed=False, rule="scheme", reason=reason)
    guard = keeper.navigation_guard
    blocks = (
        guard.block_log
        if guard is not None
        else BlockLog(
            store=keeper.store, clock=keeper.clock, telemetry=keeper.telemetry, audit=None
        )
    )
    block = await blocks.record(
        conversation, url, "GET", verdict, "Document", generation=keeper.generation
    )
    return blocked_error(block)


def blocked_error(block: BlockRecord) -> NavigationBlocked:
    """The :class:`NavigationBlocked` that tells the caller of ``block``."""
    where = f"{block.origin}{block.path}"
    if block.rule == "scheme":
        return NavigationBlocked(f"refused to navigate to {where}: {block.reason}", block=block)
    return NavigationBlocked(
        f"the Guard blocked {block.method} {where}: {block.reason}", block=block
    )
